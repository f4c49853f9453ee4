package maintenance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/outputcheck"
	"github.com/iceberg-maintainer/maintainer/lock/memlock"
)

// checkDoc fails the test for each breach of the output conventions in v's
// JSON and each of the contract's paths it lacks, and unless the JSON reads
// back into v's type as the same document.
func checkDoc(t *testing.T, what string, v any, paths ...string) {
	t.Helper()
	doc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	outputcheck.Expect(t, what, doc, paths...)
	back := reflect.New(reflect.TypeOf(v))
	if err := json.Unmarshal(doc, back.Interface()); err != nil {
		t.Errorf("%s does not read back into %T: %v\n%s", what, v, err, doc)
		return
	}
	if again, err := json.Marshal(back.Elem().Interface()); err != nil || string(again) != string(doc) {
		t.Errorf("%s read back into %T writes\n%s\nnot\n%s (%v)", what, v, again, doc, err)
	}
}

// Every document of run, plan, status and GET /v1/status follows the
// output conventions, planned and executed, with something to do for each
// task and with nothing to do.
func TestOutputDocumentsFollowTheConventions(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Expire.Enabled, e.policy.Orphans.Enabled = true, true
	e.policy.Expire.RetainLast, e.policy.Expire.MaxSnapshotAge = 1, time.Hour
	target := int64(256 << 20)
	e.policy.Settings = map[string][]Setting{TaskCompact: {
		{Key: "compact.target_file_size", Value: "256MiB", Bytes: &target, Source: "table property maintainer.compact.target_file_size"},
		{Key: "compact.trigger.interval", Value: "2d", Source: "config tables[0]"},
	}}
	// Four days on, an unreferenced file is older than the orphans' min_age.
	now := time.Now().Add(96 * time.Hour)
	loc := strings.TrimPrefix(e.tbl.Location(), "file://")
	if err := os.WriteFile(filepath.Join(loc, "data", "orphan.parquet"), []byte("orphan"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.runner(t, memlock.New(), func() time.Time { return now })
	ident := e.opt.Identifier()
	contract := map[string][]string{
		TaskCompact: {"compact.groups", "compact.partitions", "compact.dead_delete_files", "compact.commits", "compact.target_file_size_bytes"},
		TaskExpire:  {"expire.expired", "expire.removed_refs", "expire.policy.max_snapshot_age"},
		TaskOrphans: {"orphans.candidates", "orphans.cutoff"},
	}
	for _, req := range []Request{{DryRun: true, Force: true}, {Force: true}, {Force: true}} {
		for _, o := range r.RunTable(t.Context(), ident, req) {
			if o.Status == StatusFailed {
				t.Fatalf("%s: %s", o.Task, o.Error)
			}
			checkDoc(t, o.Task+" "+o.Status, o, append([]string{"duration_seconds"}, contract[o.Task]...)...)
		}
	}
	checkDoc(t, "status", r.Health(t.Context(), ident), "tasks", "avg_file_size_bytes", "small_file_threshold_bytes")

	s := newScheduler(t, r, time.Second)
	checkDoc(t, "scheduler status before the first poll", s.Status(), "queue", "running", "recent")
	s.poll(t.Context())
	if _, err := s.Enqueue(t.Context(), TableRequest{Table: tableName, Source: "http"}); err != nil {
		t.Fatal(err)
	}
	checkDoc(t, "scheduler status", s.Status(), "queue", "running", "recent")
}
