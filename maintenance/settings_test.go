package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A task turned off by a table property is skipped with a reason naming
// the property, and plan lists where its values came from.
func TestDisabledByTablePropertySaysSo(t *testing.T) {
	e := newEnv(t, 6)
	e.policy.Compact.Enabled = false
	e.policy.Settings = map[string][]Setting{TaskCompact: {
		{Key: "compact.enabled", Value: "false", Source: "table property maintainer.compact.enabled"},
	}}
	before := e.current(t).SnapshotID
	r := e.runner(t, nil, time.Now)
	for _, dry := range []bool{true, false} {
		out := r.RunTable(t.Context(), e.opt.Identifier(), Request{Tasks: []string{TaskCompact}, DryRun: dry})
		if len(out) != 1 || out[0].Status != StatusSkipped ||
			out[0].Reason != "compaction disabled by table property maintainer.compact.enabled" {
			t.Fatalf("dry run %v: %+v", dry, out)
		}
		if dry != (len(out[0].Settings) == 1) {
			t.Errorf("dry run %v: settings %+v; want them on plans only", dry, out[0].Settings)
		}
	}
	if got := e.current(t).SnapshotID; got != before {
		t.Errorf("the table changed: snapshot %d -> %d", before, got)
	}
}

// A task whose table properties cannot be honoured fails with their error
// and does nothing, due or not on a plan; the other tasks run.
func TestInvalidTablePropertyFailsTheTask(t *testing.T) {
	e := newEnv(t, 6)
	bad := errors.New(`table demo.events: table property refused: maintainer.compact.enabled="flase"`)
	e.policy.Invalid = map[string]error{TaskCompact: bad}
	before := e.current(t).SnapshotID
	r := e.runner(t, nil, time.Now)
	plan := r.RunTable(t.Context(), e.opt.Identifier(), Request{DryRun: true})
	if plan[0].Status != StatusFailed || !strings.Contains(plan[0].Error, "maintainer.compact.enabled") {
		t.Fatalf("plan: %+v", plan[0])
	}
	out := r.RunTable(t.Context(), e.opt.Identifier(), Request{Force: true})
	if out[0].Task != TaskCompact || out[0].Status != StatusFailed || !errors.Is(out[0].Err(), bad) {
		t.Fatalf("run: %+v", out[0])
	}
	for _, o := range out[1:] {
		if o.Status != StatusSkipped { // disabled by the env
			t.Errorf("%s: %+v", o.Task, o)
		}
	}
	if got := e.current(t).SnapshotID; got != before {
		t.Errorf("the table changed: snapshot %d -> %d", before, got)
	}
	// The failure is recorded, so the rate limit spaces the next report.
	st, err := e.state.Load(t.Context(), tableName, TaskCompact)
	if err != nil || st.LastAttempt.IsZero() || st.LastError == "" {
		t.Errorf("trigger state %+v, %v; want the failed attempt recorded", st, err)
	}
}
