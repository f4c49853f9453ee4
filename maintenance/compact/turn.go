package compact

import (
	"context"

	"github.com/iceberg-maintainer/maintainer/internal/turn"
)

// awaitTurn waits before retry attempt+1: for the other writer's next
// commit when the table's head can be read, else backoff(attempt). It
// returns false when ctx ends.
func (e *executor) awaitTurn(ctx context.Context, attempt int) (turn.Turn, bool) {
	tu, ok := turn.Await(ctx, e.opts.Head, e.current.Identifier(), backoff(attempt))
	if tu.Err != nil && ctx.Err() == nil {
		e.log.Debug("could not read the table's head; backing off instead", "err", tu.Err)
	}
	return tu, ok
}
