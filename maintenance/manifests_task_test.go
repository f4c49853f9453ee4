package maintenance

import (
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/maintenance/manifests"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// The manifests task through the runner: a dry run says what it would do,
// a run rewrites the manifests and says how many before and after, the
// generic outcome metrics count it, and its own commit (a replace, marked as
// the maintainer's) makes no task due: compaction's commit_count still sees
// only the writers' commits.
func TestManifestsTask(t *testing.T) {
	e := newEnv(t, 4)
	e.policy.Compact.Enabled = true
	e.policy.Manifests = manifests.DefaultConfig()
	e.policy.Manifests.MinManifests = 4
	e.policy.Triggers = map[string]trigger.Config{TaskCompact: {CommitCount: 5}}
	r := e.runner(t, nil, nil)
	ident := e.opt.Identifier()
	req := Request{Tasks: []string{TaskManifests}}

	o := one(t, r.RunTable(t.Context(), ident, Request{Tasks: req.Tasks, DryRun: true}), TaskManifests)
	if o.Status != StatusPlanned || o.Manifests == nil || o.Manifests.ManifestsBefore != 4 || len(o.Manifests.Groups) != 1 ||
		!strings.HasPrefix(o.Reason, "would rewrite 4 small manifests") {
		t.Fatalf("dry run: %+v %+v", o, o.Manifests)
	}
	o = one(t, r.RunTable(t.Context(), ident, req), TaskManifests)
	if o.Status != StatusSucceeded || !o.Changed() || o.Manifests.ManifestsAfter != 1 || o.Manifests.EntriesRewritten != 4 ||
		len(o.Manifests.Commits) != 1 || !strings.HasPrefix(o.Reason, "rewrote 4 manifests into 1 (4 entries): 4 manifests") {
		t.Fatalf("run: %+v %+v", o, o.Manifests)
	}
	if head := e.current(t); head.SnapshotID != o.Manifests.Commits[0] {
		t.Fatalf("head %d, committed %v", head.SnapshotID, o.Manifests.Commits)
	}
	o = one(t, r.RunTable(t.Context(), ident, req), TaskManifests)
	if o.Status != StatusNotDue || !strings.Contains(o.Reason, "fewer than min_manifests (4)") {
		t.Fatalf("second run: %+v", o)
	}
	if got := counter(t, r.metrics.runs.WithLabelValues(tableName, TaskManifests, ResultSuccess)); got != 1 {
		t.Errorf("runs_total success = %v; want 1", got)
	}
	due, reasons, err := r.DueTasks(t.Context(), ident, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range due {
		if d == TaskCompact {
			t.Fatalf("compaction due after 4 writer commits and the rewrite's: %v", reasons)
		}
	}
}
