package main

// Scopes that are given but say nothing, or are given twice, are usage
// errors: a CronJob's --where "$FILTER" with the variable unset, or a
// second --where, would otherwise compact more than the job asked for.

import (
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

func TestWhereBlankOrRepeatedIsRefused(t *testing.T) {
	t.Parallel()
	const name = "scoped"
	w := newGenWarehouseOf(t, sqliteCatalog, gen.Options{Appends: 6, RowsPerAppend: 50, Partitions: 2, Seed: 14}, name)
	before := w.state(t, name)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--task", "compact", "--force", "--where", ""}, "--where: is empty"},
		{[]string{"run", "--task", "compact", "--force", "--where", "   "}, "--where: is empty"},
		{[]string{"plan", "--where", ""}, "--where: is empty"},
		{[]string{"run", "--task", "compact", "--force", "--where", "event_time >= DATE '2024-01-02'", "--where", "event_time < DATE '2024-01-03'"},
			"--where: given 2 times; write one filter, joining the conditions with AND"},
	} {
		r := runMaintainer(t, w.dir, append(tc.args, "--config", w.cfg)...)
		expectCode(t, r, exitUsage, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: stderr lacks %q:\n%s", tc.args, tc.want, r)
		}
	}
	if after := w.state(t, name); after != before {
		t.Fatalf("a refused run changed the table: %+v -> %+v", before, after)
	}
}
