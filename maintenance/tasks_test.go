package maintenance

import (
	"slices"
	"testing"
)

// Every task is in the registry once, found by its name, and switched on
// by its own block of the policy only.
func TestTaskRegistry(t *testing.T) {
	names := TaskNames()
	if len(names) == 0 {
		t.Fatal("no tasks")
	}
	for i, name := range names {
		if name == "" || slices.Index(names, name) != i {
			t.Errorf("task %d: name %q is empty or repeated in %q", i, name, names)
		}
		task, ok := LookupTask(name)
		if !ok || task.Name != name || task.Enabled == nil || task.run == nil {
			t.Errorf("LookupTask(%q) = %+v, %v", name, task, ok)
		}
	}
	if _, ok := LookupTask("vacuum"); ok {
		t.Error(`LookupTask("vacuum") found a task`)
	}
	// One policy per task with only that task's block enabled.
	only := map[string]Policy{TaskCompact: {}, TaskDeletes: {}, TaskManifests: {}, TaskExpire: {}, TaskOrphans: {}}
	for name, p := range only {
		switch name {
		case TaskCompact:
			p.Compact.Enabled = true
		case TaskDeletes:
			p.Deletes.Enabled = true
		case TaskManifests:
			p.Manifests.Enabled = true
		case TaskExpire:
			p.Expire.Enabled = true
		case TaskOrphans:
			p.Orphans.Enabled = true
		}
		only[name] = p
	}
	if len(only) != len(names) {
		t.Fatalf("the test knows %d tasks, the registry has %q", len(only), names)
	}
	for _, task := range Tasks() {
		for name, p := range only {
			if got := task.Enabled(p); got != (name == task.Name) {
				t.Errorf("%s enabled = %v with only %s on", task.Name, got, name)
			}
		}
	}
}

// A pass and the queue's merge both follow the registry's order, whatever
// order a request names the tasks in.
func TestTasksRunInRegistryOrder(t *testing.T) {
	names := TaskNames()
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	for _, merged := range [][]string{mergeTasks(nil, nil), mergeTasks(nil, reversed), mergeTasks(reversed[:1], reversed[1:])} {
		if !slices.Equal(merged, names) {
			t.Errorf("merged tasks %q; want %q", merged, names)
		}
	}

	e := newEnv(t, 1)
	e.policy.Compact.Enabled = false // every task reports itself disabled: no work, only the order
	r := e.runner(t, nil, nil)
	for _, req := range []Request{{}, {Tasks: reversed}} {
		var got []string
		for _, o := range r.RunTable(t.Context(), e.opt.Identifier(), req) {
			if o.Status != StatusSkipped {
				t.Errorf("%s: %s (%s); want skipped", o.Task, o.Status, o.Error)
			}
			got = append(got, o.Task)
		}
		if !slices.Equal(got, names) {
			t.Errorf("tasks %q ran as %q; want %q", req.Tasks, got, names)
		}
	}
}
