package maintenance

import (
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// The hold of a requested run reads the rate limit from the policy of the
// table's last load while it is younger than the pass length: requests and
// alerts between two polls load the table no more. An older one is loaded
// again.
func TestHeldUntilReusesTheLastLoadsPolicy(t *testing.T) {
	e := newEnv(t, 2)
	e.policy.Triggers[TaskCompact] = trigger.Config{CommitCount: 100, RateLimit: time.Hour}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cat := &countingCatalog{Catalog: e.cat}
	r := NewRunner(Deps{
		Catalog:    cat,
		Policy:     func(string, iceberg.Properties) (Policy, error) { return e.policy, nil },
		Selected:   func(string) bool { return true },
		State:      e.state,
		Now:        func() time.Time { return now },
		PassLength: time.Minute,
	})
	ctx := t.Context()
	last := now.Add(-10 * time.Minute)
	if err := e.state.Save(ctx, tableName, TaskCompact, trigger.State{LastRun: last, LastAttempt: last}); err != nil {
		t.Fatal(err)
	}
	ident := e.tbl.Identifier()
	if _, _, err := r.DueTasks(ctx, ident, false); err != nil { // the poll
		t.Fatal(err)
	}
	for range 3 {
		held, err := r.HeldUntil(ctx, ident, nil)
		if err != nil || !held[TaskCompact].Equal(last.Add(time.Hour)) {
			t.Fatalf("held %v, err %v; want compact held until %s", held, err, last.Add(time.Hour))
		}
	}
	if n := cat.loads.Load(); n != 1 {
		t.Fatalf("%d loads for a poll and 3 holds within the pass length; want 1", n)
	}
	now = now.Add(time.Minute)
	if _, err := r.HeldUntil(ctx, ident, nil); err != nil {
		t.Fatal(err)
	}
	if n := cat.loads.Load(); n != 2 {
		t.Fatalf("%d loads after the pass length; want the policy loaded again (2)", n)
	}
}

// What the Runner keeps of each table's last load is forgotten once the
// table has not been loaded for the memory's age: a catalog whose tables
// come and go does not grow it for ever.
func TestLastLoadsForgetsTablesNoLongerLoaded(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newLastLoads[bool](time.Hour, func() time.Time { return now })
	for _, name := range []string{"db.a", "db.b", "db.c"} {
		l.put(name, true)
	}
	now = now.Add(30 * time.Minute)
	l.put("db.c", true) // c is still loaded; a and b are not
	if v, ok := l.get("db.a"); !ok || !v {
		t.Fatal("a table loaded within the hour is forgotten")
	}
	now = now.Add(40 * time.Minute)
	if _, ok := l.get("db.a"); ok {
		t.Fatal("a table last loaded over an hour ago is still remembered")
	}
	l.put("db.d", false)
	if n := len(l.m); n != 2 {
		t.Fatalf("%d tables remembered, want the 2 loaded within the hour (c, d)", n)
	}
	if v, ok := l.get("db.d"); !ok || v {
		t.Fatalf("db.d: %v %v, want false remembered", v, ok)
	}
	none := newLastLoads[bool](0, func() time.Time { return now })
	none.put("db.a", true)
	if _, ok := none.get("db.a"); ok || len(none.m) != 0 {
		t.Fatal("maxAge 0 keeps a value")
	}
}
