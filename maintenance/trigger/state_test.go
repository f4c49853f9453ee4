package trigger

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// NewRetry keeps the paths in order without duplicates, at most
// MaxRetryPaths of them, and counts the rest as dropped.
func TestNewRetryIsBounded(t *testing.T) {
	if r := NewRetry("u"); r != nil {
		t.Fatalf("no paths: %+v, want nil", r)
	}
	r := NewRetry("u", []string{"a", "b"}, []string{"b", "c"})
	if !slices.Equal(r.Paths, []string{"a", "b", "c"}) || r.Dropped != 0 || r.TableUUID != "u" {
		t.Fatalf("%+v", r)
	}
	many := make([]string, MaxRetryPaths+5)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	r = NewRetry("u", []string{"x"}, many, []string{"x"})
	if len(r.Paths) != MaxRetryPaths || r.Dropped != 6 || r.Paths[0] != "x" {
		t.Fatalf("%d paths, %d dropped, first %q", len(r.Paths), r.Dropped, r.Paths[0])
	}
}

// The paths belong to one table: a table re-created under the same name
// does not inherit them.
func TestRetryPathsAreTheTables(t *testing.T) {
	st := State{Retry: NewRetry("uuid-1", []string{"a"})}
	if got := st.RetryPaths("uuid-1"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("own table: %v", got)
	}
	if got := st.RetryPaths("uuid-2"); got != nil {
		t.Fatalf("another table: %v", got)
	}
	if got := (State{}).RetryPaths("uuid-1"); got != nil {
		t.Fatalf("none kept: %v", got)
	}
}

// The list survives a file store round trip, and Record leaves it alone.
func TestRetrySurvivesStoreAndRecord(t *testing.T) {
	ctx := context.Background()
	s, err := NewFileStore(filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := Record(State{Retry: NewRetry("u", []string{"s3://b/a"})}, Mark{}, now, "failure", nil, false)
	if err := s.Save(ctx, "db.t", "expire", st); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "db.t", "expire")
	if err != nil || got.Retry == nil || !slices.Equal(got.Retry.Paths, []string{"s3://b/a"}) || got.Retry.TableUUID != "u" {
		t.Fatalf("%+v (%v)", got.Retry, err)
	}
}

// A path that fails again is kept with one more run until MaxRetryRuns,
// then dropped; runs of an uncounted retry (the store was unreachable) or
// of another table's list do not count; new paths start at none.
func TestNextRetryDropsAPathAfterMaxRetryRuns(t *testing.T) {
	r := NewRetry("u", []string{"stuck", "ok"})
	var dropped []string
	for run := 1; run < MaxRetryRuns; run++ {
		r, dropped = NextRetry(r, "u", []string{"stuck"}, every)
		if len(dropped) != 0 || r == nil || r.Runs["stuck"] != run || !slices.Equal(r.Paths, []string{"stuck"}) {
			t.Fatalf("run %d: %+v, dropped %v", run, r, dropped)
		}
	}
	r, dropped = NextRetry(r, "u", []string{"stuck"}, nil, []string{"new"})
	if len(dropped) != 0 || r.Runs["stuck"] != MaxRetryRuns-1 || r.Runs["new"] != 0 || !slices.Equal(r.Paths, []string{"stuck", "new"}) {
		t.Fatalf("uncounted run: %+v, dropped %v", r, dropped)
	}
	if o, _ := NextRetry(r, "other", []string{"stuck"}, every); o.Runs["stuck"] != 1 {
		t.Fatalf("another table's runs counted: %+v", o)
	}
	r, dropped = NextRetry(r, "u", []string{"stuck", "new"}, every)
	if !slices.Equal(dropped, []string{"stuck"}) || !slices.Equal(r.Paths, []string{"new"}) || r.Runs["new"] != 1 {
		t.Fatalf("last run: %+v, dropped %v", r, dropped)
	}
	if r, dropped = NextRetry(nil, "u", nil, every); r != nil || dropped != nil {
		t.Fatalf("nothing to keep: %+v, %v", r, dropped)
	}
}

// every counts a run against each path.
func every(string) bool { return true }

// A run counts only against the paths it says: one whose delete was never
// sent keeps its count.
func TestNextRetryCountsOnlyTheGivenPaths(t *testing.T) {
	r, _ := NextRetry(nil, "u", nil, nil, []string{"sent", "unsent"})
	r, _ = NextRetry(r, "u", []string{"sent", "unsent"}, func(p string) bool { return p == "sent" })
	if r.Runs["sent"] != 1 || r.Runs["unsent"] != 0 || len(r.Paths) != 2 {
		t.Fatalf("retry %+v; want sent counted once, unsent not, both kept", r)
	}
}
