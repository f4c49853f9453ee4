package maintenance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// heldRunner holds every requested compaction for an hour.
type heldRunner struct{ *fleetRunner }

func (heldRunner) HeldUntil(context.Context, table.Identifier, []string) (map[string]time.Time, error) {
	return map[string]time.Time{TaskCompact: time.Now().Add(time.Hour)}, nil
}

// Held requests of one table and task with different wheres are listed in
// status in a fixed order (by where), not in map order.
func TestStatusHeldOrderedByWhere(t *testing.T) {
	r := heldRunner{newFleetRunner(1)}
	cfg := DefaultSchedulerConfig()
	cfg.PollInterval = time.Hour
	s, err := NewScheduler(cfg, SchedulerDeps{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	s.poll(t.Context())
	for _, w := range []string{"x = 2", "", "x = 1", "x = 3"} {
		if _, err := s.Enqueue(t.Context(), TableRequest{Table: "db.t000", Tasks: []string{TaskCompact}, Source: "http", Where: w}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"", "x = 1", "x = 2", "x = 3"}
	for range 20 {
		var got []string
		for _, h := range s.Status().Held {
			got = append(got, h.Where)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("held in status by where %q; want %q", got, want)
		}
	}
}
