package compact

import (
	"context"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Waiting for a turn: a commit conflict says another writer committed
// while the attempt was under way, at some unknown point of it. A writer
// that commits periodically commits next about one period after that, so
// a retry started at once has on average half a period ahead of it: less
// than an attempt needs beside a writer whose commits cost what ours do
// (both parse and write the table's metadata file), which then wins
// nearly every race. Reading the catalog's pointer to the current metadata
// file costs a small query, not a parse, so a retry watches it and starts
// right after the writer's next commit, with the writer's whole period
// ahead. Without such a read the retry backs off as before.

// HeadReader reads where a table's current metadata file is from the
// catalog's own records, without reading that file (the SQL catalog's
// iceberg_tables row, Glue's table parameter).
type HeadReader interface {
	MetadataLocation(ctx context.Context, ident table.Identifier) (string, error)
}

const (
	// turnWait bounds the wait for the next commit: a writer that does not
	// commit again within it is paused, and the retry goes ahead.
	turnWait = time.Second
	// minHeadPoll is the shortest pause between two reads of the head;
	// a slower catalog is read at most every other half of the time:
	// twice the last read's duration.
	minHeadPoll = 5 * time.Millisecond
)

// turn is the wait of one retry: how long it watched and whether the head
// moved meanwhile.
type turn struct {
	waited time.Duration
	moved  bool
	reads  int
}

// awaitTurn waits before retry attempt+1: until the table's head moves
// from where it is now, for at most max(turnWait, backoff), or backoff
// alone without a HeadReader or when the head cannot be read. It returns
// false when ctx ends.
func (e *executor) awaitTurn(ctx context.Context, attempt int) (turn, bool) {
	start := time.Now()
	if e.opts.Head == nil {
		return turn{}, sleepCtx(ctx, backoff(attempt))
	}
	deadline := start.Add(max(turnWait, backoff(attempt)))
	read := func() (string, time.Duration, error) {
		t := time.Now()
		loc, err := e.opts.Head.MetadataLocation(ctx, e.current.Identifier())
		return loc, time.Since(t), err
	}
	from, took, err := read()
	tu := turn{reads: 1}
	for err == nil && from != "" {
		pause := max(minHeadPoll, 2*took)
		if time.Now().Add(pause).After(deadline) {
			break
		}
		if !sleepCtx(ctx, pause) {
			return tu, false
		}
		var loc string
		loc, took, err = read()
		tu.reads++
		if err == nil && loc != from {
			tu.moved, tu.waited = true, time.Since(start)
			return tu, true
		}
	}
	if err != nil || from == "" {
		if ctx.Err() == nil {
			e.log.Debug("could not read the table's head; backing off instead", "err", err)
		}
		deadline = start.Add(backoff(attempt))
	}
	ok := sleepCtx(ctx, time.Until(deadline))
	tu.waited = time.Since(start)
	return tu, ok
}
