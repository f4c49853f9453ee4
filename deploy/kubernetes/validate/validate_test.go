package validate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The in-memory copy of the repository's deploy/ folder lives here.
const (
	memDeploy = "/deploy"
	memK8s    = memDeploy + "/kubernetes"
	memBase   = memK8s + "/base"
)

// documentedSecretFile is the example of the Secret the manifests mount but
// (on purpose) do not generate; its keys stand in for the real Secret's.
const documentedSecretFile = memBase + "/secret.example.yaml"

// object is one rendered (or standalone) Kubernetes object, decoded into
// its typed Go struct.
type object struct {
	source     string // "base: Deployment/iceberg-maintainer"
	apiVersion string
	kind       string
	name       string
	yaml       []byte
	typed      any
}

// build is the output of one kustomization.
type build struct {
	name string // path relative to deploy/, e.g. "kubernetes/base"
	objs []*object
}

func (b *build) find(kind, name string) *object {
	for _, o := range b.objs {
		if o.kind == kind && o.name == name {
			return o
		}
	}
	return nil
}

// result is everything check found.
type result struct {
	builds     []*build
	standalone []*object // secret.example.yaml, deploy/prometheus/*.yaml
	configs    []*configCase
	problems   []string
	notes      []string
}

func (r *result) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// deployDir is the repository's deploy/ folder.
func deployDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "kubernetes", "base", "kustomization.yaml")); err != nil {
		t.Fatalf("deploy folder not found at %s: %v", d, err)
	}
	return d
}

// loadDeployTree copies deploy/ (without this module) into an in-memory
// file system at /deploy, so that tests can mutate a copy and add overlays.
func loadDeployTree(t testing.TB) filesys.FileSystem {
	t.Helper()
	src := deployDir(t)
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := path.Join(memDeploy, filepath.ToSlash(rel))
		if d.IsDir() {
			if rel == filepath.Join("kubernetes", "validate") || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return mem.MkdirAll(dst)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(dst, data)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
	return mem
}

// mutate replaces old by new in one file of the in-memory tree, failing the
// test when old is not there exactly once.
func mutate(t testing.TB, mem filesys.FileSystem, file, old, new string) {
	t.Helper()
	data, err := mem.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte(old)); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want 1", file, old, n)
	}
	if err := mem.WriteFile(file, bytes.Replace(data, []byte(old), []byte(new), 1)); err != nil {
		t.Fatal(err)
	}
}

// newTyped returns a pointer to the Go type of apiVersion/kind.
func newTyped(apiVersion, kind string) (any, bool) {
	switch apiVersion + ", " + kind {
	case "v1, ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1, ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1, Secret":
		return &corev1.Secret{}, true
	case "v1, Service":
		return &corev1.Service{}, true
	case "v1, Namespace":
		return &corev1.Namespace{}, true
	case "v1, PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "apps/v1, Deployment":
		return &appsv1.Deployment{}, true
	case "apps/v1, StatefulSet":
		return &appsv1.StatefulSet{}, true
	case "batch/v1, CronJob":
		return &batchv1.CronJob{}, true
	case "batch/v1, Job":
		return &batchv1.Job{}, true
	case "policy/v1, PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1, NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "rbac.authorization.k8s.io/v1, Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1, RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "autoscaling/v2, HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "monitoring.coreos.com/v1, PodMonitor":
		return &monv1.PodMonitor{}, true
	case "monitoring.coreos.com/v1, ServiceMonitor":
		return &monv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1, PrometheusRule":
		return &monv1.PrometheusRule{}, true
	case "monitoring.coreos.com/v1alpha1, AlertmanagerConfig":
		return &monv1alpha1.AlertmanagerConfig{}, true
	}
	return nil, false
}

// decodeStrict decodes YAML into v the way a strict API server would:
// duplicate keys, unknown fields and fields whose case differs from the
// schema's are errors, and no scalar is converted to fit a field's type.
func decodeStrict(y []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeObject strictly decodes one Kubernetes object by its apiVersion and
// kind; an unknown kind is an error.
func decodeObject(source string, y []byte) (*object, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(y, &meta); err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	o := &object{apiVersion: meta.APIVersion, kind: meta.Kind, name: meta.Metadata.Name, yaml: y}
	o.source = fmt.Sprintf("%s: %s/%s", source, o.kind, o.name)
	typed, ok := newTyped(meta.APIVersion, meta.Kind)
	if !ok {
		return nil, fmt.Errorf("%s: unknown kind %q of apiVersion %q: add its Go type to newTyped, or fix the apiVersion/kind", o.source, meta.Kind, meta.APIVersion)
	}
	if err := decodeStrict(y, typed); err != nil {
		return nil, fmt.Errorf("%s: strict decoding into %T: %v", o.source, typed, err)
	}
	o.typed = typed
	return o, nil
}

// kustomizationFile is one kustomization.yaml of the tree.
type kustomizationFile struct {
	dir string // in-memory path of its folder
	k   types.Kustomization
}

// findKustomizations strictly decodes every kustomization.yaml under /deploy.
func findKustomizations(mem filesys.FileSystem, r *result) []kustomizationFile {
	var out []kustomizationFile
	err := mem.Walk(memDeploy, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			if p != memDeploy && strings.HasPrefix(path.Base(p), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !isKustomizationName(path.Base(p)) {
			return nil
		}
		data, err := mem.ReadFile(p)
		if err != nil {
			return err
		}
		var k types.Kustomization
		if err := decodeStrict(data, &k); err != nil {
			r.problem("%s: strict decoding into types.Kustomization: %v", strings.TrimPrefix(p, memDeploy+"/"), err)
			return nil
		}
		switch k.Kind {
		case "", types.KustomizationKind, types.ComponentKind:
		default:
			r.problem("%s: kind %q is neither %s nor %s", p, k.Kind, types.KustomizationKind, types.ComponentKind)
			return nil
		}
		out = append(out, kustomizationFile{dir: path.Dir(p), k: k})
		return nil
	})
	if err != nil {
		r.problem("walking the tree: %v", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}

func isKustomizationName(n string) bool {
	return n == "kustomization.yaml" || n == "kustomization.yml" || n == "Kustomization"
}

// render runs kustomize (krusty, in-process) on dir and strictly decodes
// every resource it produces.
func render(mem filesys.FileSystem, dir, name string, r *result) *build {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(mem, dir)
	if err != nil {
		r.problem("%s: kustomize build: %v", name, err)
		return nil
	}
	b := &build{name: name}
	for _, res := range rm.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			r.problem("%s: %s: %v", name, res.CurId(), err)
			continue
		}
		o, err := decodeObject(name, y)
		if err != nil {
			r.problem("%v", err)
			continue
		}
		b.objs = append(b.objs, o)
	}
	if len(b.objs) == 0 {
		r.problem("%s: renders no resources", name)
	}
	return b
}

// renderAll renders every kustomization of the tree, and every component
// on top of ../base through a generated overlay.
func renderAll(mem filesys.FileSystem, r *result) {
	ks := findKustomizations(mem, r)
	if len(ks) == 0 {
		r.problem("no kustomization.yaml under deploy/")
		return
	}
	for _, kf := range ks {
		name := strings.TrimPrefix(kf.dir, memDeploy+"/")
		dir := kf.dir
		if kf.k.Kind == types.ComponentKind {
			// A component is rendered on top of the base, as a user would.
			overlay := path.Join(memK8s, ".validate-overlays", strings.ReplaceAll(name, "/", "_"))
			relBase, _ := filepath.Rel(overlay, memBase)
			relComp, _ := filepath.Rel(overlay, kf.dir)
			k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%q]\n",
				filepath.ToSlash(relBase), filepath.ToSlash(relComp))
			if err := mem.MkdirAll(overlay); err != nil {
				r.problem("%v", err)
				continue
			}
			if err := mem.WriteFile(path.Join(overlay, "kustomization.yaml"), []byte(k)); err != nil {
				r.problem("%v", err)
				continue
			}
			dir, name = overlay, "kubernetes/base+"+name
		}
		if b := render(mem, dir, name, r); b != nil {
			r.builds = append(r.builds, b)
		}
	}
	checkUnreferencedFiles(mem, ks, r)
}

// checkUnreferencedFiles reports YAML files under deploy/kubernetes that no
// kustomization uses (a forgotten resource is never applied).
func checkUnreferencedFiles(mem filesys.FileSystem, ks []kustomizationFile, r *result) {
	used := map[string]bool{}
	for _, kf := range ks {
		k := kf.k
		var files []string
		files = append(files, k.Resources...)
		files = append(files, k.Components...)
		for _, g := range k.ConfigMapGenerator {
			files = append(files, g.FileSources...)
			files = append(files, g.EnvSources...)
		}
		for _, g := range k.SecretGenerator {
			files = append(files, g.FileSources...)
			files = append(files, g.EnvSources...)
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				files = append(files, p.Path)
			}
		}
		for _, f := range files {
			if _, after, ok := strings.Cut(f, "="); ok {
				f = after // key=path
			}
			used[path.Clean(path.Join(kf.dir, f))] = true
		}
	}
	err := mem.Walk(memK8s, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			if strings.HasPrefix(path.Base(p), ".") && p != memK8s {
				return filepath.SkipDir
			}
			return nil
		}
		base := path.Base(p)
		if !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml") {
			return nil
		}
		if isKustomizationName(base) || strings.HasSuffix(base, ".example.yaml") || used[p] {
			return nil
		}
		r.problem("%s is used by no kustomization (add it to resources, or remove it)", strings.TrimPrefix(p, memDeploy+"/"))
		return nil
	})
	if err != nil {
		r.problem("walking deploy/kubernetes: %v", err)
	}
}

// docSeparator splits a multi-document YAML file.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// checkStandalone strictly decodes the YAML that no kustomization renders:
// the documented example Secret and deploy/prometheus/*.yaml (written by
// others; checked only when present).
func checkStandalone(mem filesys.FileSystem, r *result) {
	if data, err := mem.ReadFile(documentedSecretFile); err != nil {
		r.problem("%s: %v", documentedSecretFile, err)
	} else if o, err := decodeObject(strings.TrimPrefix(documentedSecretFile, memDeploy+"/"), data); err != nil {
		r.problem("%v", err)
	} else if o.kind != "Secret" {
		r.problem("%s: want a Secret, got %s", o.source, o.kind)
	} else {
		r.standalone = append(r.standalone, o)
	}

	promDir := memDeploy + "/prometheus"
	if !mem.Exists(promDir) {
		r.notes = append(r.notes, "deploy/prometheus does not exist yet: nothing to check there")
		return
	}
	files, err := mem.Glob(promDir + "/*.y*ml")
	if err != nil {
		r.problem("%v", err)
		return
	}
	for _, f := range files {
		if isKustomizationName(path.Base(f)) {
			continue // rendered by renderAll
		}
		data, err := mem.ReadFile(f)
		if err != nil {
			r.problem("%v", err)
			continue
		}
		name := strings.TrimPrefix(f, memDeploy+"/")
		for i, doc := range docSeparator.Split(string(data), -1) {
			src := fmt.Sprintf("%s#%d", name, i)
			var top map[string]any
			if err := yaml.Unmarshal([]byte(doc), &top); err != nil {
				r.problem("%s: %v", src, err)
				continue
			}
			if len(top) == 0 {
				continue
			}
			if _, ok := top["kind"]; ok {
				o, err := decodeObject(src, []byte(doc))
				if err != nil {
					r.problem("%v", err)
					continue
				}
				r.standalone = append(r.standalone, o)
				continue
			}
			if _, ok := top["groups"]; ok && len(top) == 1 {
				// A plain Prometheus rule file: the same schema as a
				// PrometheusRule's spec.
				var spec monv1.PrometheusRuleSpec
				if err := decodeStrict([]byte(doc), &spec); err != nil {
					r.problem("%s: strict decoding the rule file into monitoring/v1.PrometheusRuleSpec: %v", src, err)
					continue
				}
				r.notes = append(r.notes, fmt.Sprintf("%s: Prometheus rule file, %d group(s), strictly decoded", src, len(spec.Groups)))
				continue
			}
			keys := make([]string, 0, len(top))
			for k := range top {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			r.notes = append(r.notes, fmt.Sprintf("%s: not a Kubernetes object or rule file (keys %v): not checked here", src, keys))
		}
	}
}

// check renders and checks the whole tree.
func check(mem filesys.FileSystem) *result {
	r := &result{}
	renderAll(mem, r)
	checkStandalone(mem, r)
	for _, b := range r.builds {
		checkPolicy(b, r)
	}
	return r
}

func reportProblems(t *testing.T, r *result) {
	t.Helper()
	for _, n := range r.notes {
		t.Log("note:", n)
	}
	for _, p := range r.problems {
		t.Error(p)
	}
}

// TestManifests renders every kustomization under deploy/ with kustomize,
// strictly decodes every resource into its Go type, and checks the policy.
func TestManifests(t *testing.T) {
	r := check(loadDeployTree(t))
	reportProblems(t, r)
	want := []string{"kubernetes/base", "kubernetes/cronjob", "kubernetes/sidecar"}
	var got []string
	for _, b := range r.builds {
		got = append(got, b.name)
		var kinds []string
		for _, o := range b.objs {
			kinds = append(kinds, o.kind+"/"+o.name)
		}
		t.Logf("%s: %s", b.name, strings.Join(kinds, ", "))
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("kustomization %s was not rendered (rendered: %v)", w, got)
		}
	}
	for _, o := range r.standalone {
		t.Logf("standalone: %s", o.source)
	}
	if len(r.configs) < 3 {
		t.Errorf("found %d maintainer configs in the pods, want at least 3 (Deployment, CronJob, sidecar)", len(r.configs))
	}
}

// TestRejected shows that the checks catch a misspelled or unknown field,
// an unknown kind and broken policy, each in a copy of the tree.
func TestRejected(t *testing.T) {
	const (
		deployment = memBase + "/deployment.yaml"
		cronjob    = memK8s + "/cronjob/cronjob.yaml"
		job        = memK8s + "/sidecar/job.yaml"
		svcMonitor = memBase + "/servicemonitor.yaml"
		pdb        = memBase + "/poddisruptionbudget.yaml"
		kust       = memBase + "/kustomization.yaml"
		redis      = memK8s + "/components/redis/deployment.yaml"
	)
	cases := []struct {
		name, file, old, new, want string
	}{
		{"misspelled Deployment field", deployment,
			"imagePullPolicy: IfNotPresent", "imagePullPolicyy: IfNotPresent", `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{"field with the wrong case", deployment,
			"terminationGracePeriodSeconds: 90", "TerminationGracePeriodSeconds: 90", `unknown field "spec.template.spec.TerminationGracePeriodSeconds"`},
		{"duplicate field", deployment,
			"replicas: 2", "replicas: 2\n  replicas: 3", `mapping key "replicas" already defined`},
		{"string where an integer belongs", deployment,
			"replicas: 2", `replicas: "2"`, "cannot unmarshal string into Go struct field"},
		{"misspelled CronJob field", cronjob,
			"concurrencyPolicy: Forbid", "concurencyPolicy: Forbid", `unknown field "spec.concurencyPolicy"`},
		{"misspelled ServiceMonitor field", svcMonitor,
			"scrapeTimeout: 10s", "scrapeTimout: 10s", `unknown field "spec.endpoints[0].scrapeTimout"`},
		{"misspelled field in a component", redis,
			"readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"misspelled kustomization field", kust,
			"configMapGenerator:", "configMapGenerators:", `unknown field "configMapGenerators"`},
		{"unknown kind", pdb,
			"kind: PodDisruptionBudget", "kind: PodDisruptionBudgett", `unknown kind "PodDisruptionBudgett"`},
		{"writable root file system", deployment,
			"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"grace period not above shutdown_grace", deployment,
			"terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds 60 must exceed scheduler.shutdown_grace 1m0s"},
		{"liveness probe on /readyz", deployment,
			"path: /healthz\n              port: http\n            periodSeconds: 20", "path: /readyz\n              port: http\n            periodSeconds: 20", "livenessProbe must GET /healthz"},
		{"missing resources", redis,
			"              memory: 256Mi\n", "", "limits.memory"},
		{"exit codes 1 and 2 retried", cronjob,
			"          - action: FailJob\n", "          - action: Count\n", "exit code 1 must map to FailJob"},
		{"concurrent CronJob runs", cronjob,
			"concurrencyPolicy: Forbid", "concurrencyPolicy: Allow", "concurrencyPolicy must be Forbid"},
		{"sidecar as a plain init container", job,
			"          restartPolicy: Always\n", "", "serve must run as a native sidecar"},
		{"a file no kustomization uses", memBase + "/kustomization.yaml",
			"  - poddisruptionbudget.yaml\n", "", "poddisruptionbudget.yaml is used by no kustomization"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := loadDeployTree(t)
			mutate(t, mem, c.file, c.old, c.new)
			r := check(mem)
			for _, p := range r.problems {
				if strings.Contains(p, c.want) {
					t.Logf("rejected as expected: %s", p)
					return
				}
			}
			t.Errorf("no problem mentions %q; problems:\n%s", c.want, strings.Join(r.problems, "\n"))
		})
	}
}
