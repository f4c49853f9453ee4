package turn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// fakeHead answers the i-th read with locs[min(i, len-1)], or err.
type fakeHead struct {
	mu    sync.Mutex
	locs  []string
	err   error
	reads int
}

func (h *fakeHead) MetadataLocation(ctx context.Context, _ table.Identifier) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := min(h.reads, len(h.locs)-1)
	h.reads++
	if h.err != nil {
		return "", h.err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return h.locs[i], nil
}

var ident = table.Identifier{"db", "t"}

// recorder is a waiting.Recorder that keeps what it was told.
type recorder []string

func (r *recorder) Begin(what string) func() {
	*r = append(*r, "begin "+what)
	return func() { *r = append(*r, "end "+what) }
}

func TestAwait(t *testing.T) {
	t.Run("goes once the head moves", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1", "v1", "v1", "v2"}}
		tu, ok := Await(t.Context(), h, ident, 0)
		if !ok || !tu.Moved || tu.Reads != 4 || tu.Waited >= MaxWait {
			t.Fatalf("turn %+v ok %v; want it moved at the 4th read, before %v", tu, ok, MaxWait)
		}
	})
	t.Run("a paused writer costs at most MaxWait", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1"}}
		tu, ok := Await(t.Context(), h, ident, 0)
		if !ok || tu.Moved || tu.Waited < MaxWait-2*MinPoll || tu.Waited > MaxWait+500*time.Millisecond {
			t.Fatalf("turn %+v ok %v; want it given up after about %v", tu, ok, MaxWait)
		}
		if tu.Reads > int(MaxWait/MinPoll)+1 {
			t.Fatalf("%d reads of the head in %v: more than one per %v", tu.Reads, MaxWait, MinPoll)
		}
	})
	t.Run("a longer backoff is waited out whole", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1"}}
		tu, ok := Await(t.Context(), h, ident, MaxWait+300*time.Millisecond)
		if !ok || tu.Moved || tu.Waited < MaxWait+300*time.Millisecond-2*MinPoll {
			t.Fatalf("turn %+v ok %v; want the backoff waited", tu, ok)
		}
	})
	t.Run("an unreadable head backs off", func(t *testing.T) {
		h := &fakeHead{locs: []string{"v1"}, err: errors.New("database is locked")}
		for _, want := range []time.Duration{0, 200 * time.Millisecond} {
			tu, ok := Await(t.Context(), h, ident, want)
			if !ok || tu.Moved || tu.Err == nil || tu.Waited < want || tu.Waited > want+300*time.Millisecond {
				t.Fatalf("turn %+v ok %v; want the backoff %v", tu, ok, want)
			}
		}
	})
	t.Run("no head reader backs off", func(t *testing.T) {
		start := time.Now()
		if _, ok := Await(t.Context(), nil, ident, 0); !ok || time.Since(start) > 300*time.Millisecond {
			t.Fatalf("ok %v after %v; want no wait", ok, time.Since(start))
		}
	})
	t.Run("the wait is reported as waiting", func(t *testing.T) {
		var l recorder
		Await(waiting.With(t.Context(), &l), &fakeHead{locs: []string{"v1", "v2"}}, ident, 0)
		if len(l) != 2 || l[0] != "begin retry: the other writer's next commit" || l[1] != "end retry: the other writer's next commit" {
			t.Fatalf("recorded %q", l)
		}
	})
	t.Run("an ended context never waits, nor says go", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for range 20 { // a select would pick a ready zero timer half the time
			if _, ok := Await(ctx, nil, ident, 0); ok {
				t.Fatal("ok after the context ended")
			}
		}
	})
	t.Run("cancellation ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		if _, ok := Await(ctx, &fakeHead{locs: []string{"v1"}}, ident, 0); ok || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("ok %v after %v; want false soon after the cancel", ok, time.Since(start))
		}
	})
}
