package catchup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// withLocation is tbl as if its metadata were at loc.
func withLocation(tbl *table.Table, loc string) *table.Table {
	return table.New(tbl.Identifier(), tbl.Metadata(), loc, tbl.FS, nil)
}

// Run advances until a load finds the location it advanced to; a table
// whose metadata moves on every load ends after MaxRounds with
// ErrKeptMoving instead of chasing the writer forever.
func TestRunStopsWhenTheMetadataStands(t *testing.T) {
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: 1, RowsPerAppend: 5, Partitions: 1, Seed: 1})
	for _, c := range []struct {
		name       string
		moves      int // loads that find a new location
		wantLoads  int
		wantMoving bool
	}{
		{"nothing moved", 0, 1, false},
		{"three commits meanwhile", 3, 4, false},
		{"a writer faster than every round", 1 << 20, MaxRounds - 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var at string
			loads := 0
			load := func(context.Context) (*table.Table, error) {
				loads++
				if loads <= c.moves {
					return withLocation(tbl, fmt.Sprintf("file:/t/metadata/%05d.metadata.json", loads)), nil
				}
				return withLocation(tbl, at), nil
			}
			advance := func(_ context.Context, fresh *table.Table) error { at = fresh.MetadataLocation(); return nil }
			err := Run(t.Context(), withLocation(tbl, "file:/t/metadata/00000.metadata.json"), func() string { return at }, load, advance)
			if got := errors.Is(err, ErrKeptMoving); got != c.wantMoving {
				t.Fatalf("err = %v; want ErrKeptMoving: %v", err, c.wantMoving)
			}
			if c.wantMoving && !strings.Contains(err.Error(), "metadata.json") {
				t.Errorf("error %q does not name the last metadata location", err)
			}
			if loads != c.wantLoads {
				t.Errorf("%d loads; want %d", loads, c.wantLoads)
			}
		})
	}
}
