// Package catchup brings a reader of a table's metadata (a set of the
// files it references) up to the table's current metadata before files are
// deleted: orphan removal and expiry's retried deletes both need it.
package catchup

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/table"
)

// MaxRounds bounds the loads of one Run. Each round reads only what was
// committed since the one before, so a writer would have to commit faster
// than that read takes, MaxRounds times in a row, to exhaust it; the
// caller then deletes nothing more instead of chasing the writer forever.
const MaxRounds = 50

// ErrDeletedReferenced: a file was deleted that the table's metadata,
// caught up after the delete, references: a writer committed it while it was
// being deleted, and the table has lost a live file. Orphan removal and
// expiry's retried deletes both report it (as their own
// ErrDeletedReferenced, this error).
var ErrDeletedReferenced = errors.New("deleted files that the table references")

// ErrKeptMoving: the metadata moved on every one of MaxRounds loads.
var ErrKeptMoving = errors.New("the table's metadata kept moving while catching up")

// Run hands fresh to advance, then re-loads the table and advances again,
// for as long as the metadata location moves; it stops at the first load
// whose location is at(), the location the reader last advanced to. When
// nothing moved since, it costs nothing beyond the load of fresh. Without a
// metadata location a move cannot be told from none, so fresh is advanced
// once and that is all that is known. Past MaxRounds loads it returns
// ErrKeptMoving naming the last location.
func Run(ctx context.Context, fresh *table.Table, at func() string,
	load func(context.Context) (*table.Table, error), advance func(context.Context, *table.Table) error,
) error {
	for round := 1; ; round++ {
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
		if round >= MaxRounds {
			return fmt.Errorf("%w: %d commits in a row landed before each re-load was read (last %s)", ErrKeptMoving, MaxRounds, loc)
		}
		var err error
		if fresh, err = load(ctx); err != nil {
			return err
		}
	}
}
