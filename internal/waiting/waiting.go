// Package waiting lets a call that may block on a remote service (a catalog
// request, an object-store request) say so through its context, so that a
// long-running task's progress log can name what it is waiting on. Without
// a Recorder in the context, Begin does nothing.
package waiting

import "context"

// Recorder is told when a call starts waiting and when it stops.
type Recorder interface {
	// Begin records that what ("catalog: load table") is in flight; the
	// returned func ends it.
	Begin(what string) (end func())
}

type key struct{}

// With returns ctx carrying r: calls made with it report to r.
func With(ctx context.Context, r Recorder) context.Context { return context.WithValue(ctx, key{}, r) }

// Begin records, in the Recorder of ctx if any, that what is in flight until
// end is called.
func Begin(ctx context.Context, what string) (end func()) {
	if r, ok := ctx.Value(key{}).(Recorder); ok {
		return r.Begin(what)
	}
	return func() {}
}
