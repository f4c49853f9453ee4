// Package catchup brings a reader of a table's metadata (a set of the
// files it references) up to the table's current metadata before files are
// deleted: orphan removal and expiry's retried deletes both need it.
package catchup

import (
	"context"

	"github.com/apache/iceberg-go/table"
)

// Run hands fresh to advance, then re-loads the table and advances again,
// for as long as the metadata location moves; it stops at the first load
// whose location is at(), the location the reader last advanced to. When
// nothing moved since, it costs nothing beyond the load of fresh. Without a
// metadata location a move cannot be told from none, so fresh is advanced
// once and that is all that is known.
func Run(ctx context.Context, fresh *table.Table, at func() string,
	load func(context.Context) (*table.Table, error), advance func(context.Context, *table.Table) error,
) error {
	for {
		loc := fresh.MetadataLocation()
		if loc != "" && loc == at() {
			return nil
		}
		if err := advance(ctx, fresh); err != nil {
			return err
		}
		if loc == "" {
			return nil
		}
		var err error
		if fresh, err = load(ctx); err != nil {
			return err
		}
	}
}
