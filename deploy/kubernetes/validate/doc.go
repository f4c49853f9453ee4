// Package validate holds the tests that render and strictly check the
// Kubernetes manifests in deploy/kubernetes. It has no code of its own.
package validate
