package deletes

import (
	"context"
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// A plan that changes nothing says why in its own terms: a v1 table (which
// has a snapshot) has no delete files, and a table whose position deletes
// are too few to merge says how many are left and why, not that there are
// no small ones.
func TestIdleReasons(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	for _, tc := range []struct{ fixture, want string }{
		{"spark_v1_partitioned_20files", ReasonFormatV1},
		{"hive_v2_partitioned_posdel", "no dangling delete files; 3 position-delete file(s) in 3 partition(s) left as they are: " + ReasonTooFewFiles},
		{"spark_v2_eqdel", ReasonNothingToDo},
	} {
		_, tbl, _ := testenv.FixtureTable(t, tc.fixture)
		plan, err := PlanTable(ctx, tbl, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Empty() {
			t.Fatalf("%s: plan %+v; want nothing to do", tc.fixture, plan)
		}
		if got := plan.IdleReason(); !strings.HasPrefix(got, tc.want) || (tc.want == ReasonNothingToDo && got != tc.want) {
			t.Errorf("%s: reason %q; want %q", tc.fixture, got, tc.want)
		}
	}
}
