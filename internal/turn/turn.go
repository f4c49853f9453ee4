// Package turn lets a commit retry start right after another writer's next
// commit. A commit conflict says another writer committed while the
// attempt was under way, at some unknown point of it. A writer that commits
// periodically commits next about one period after that, so a retry started
// at once has on average half a period ahead of it: less than an attempt
// needs beside a writer whose commits cost what ours do (both parse and
// write the table's metadata file), which then wins nearly every race.
// Reading the catalog's pointer to the current metadata file costs a small
// query, not a parse, so a retry watches it and starts right after the
// writer's next commit, with the writer's whole period ahead. Without such
// a read the retry backs off as before.
package turn

import (
	"context"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// HeadReader reads where a table's current metadata file is from the
// catalog's own records, without reading that file (the SQL catalog's
// iceberg_tables row, Glue's table parameter).
type HeadReader interface {
	MetadataLocation(ctx context.Context, ident table.Identifier) (string, error)
}

const (
	// MaxWait bounds the wait for the next commit: a writer that does not
	// commit again within it is paused, and the retry goes ahead.
	MaxWait = time.Second
	// MinPoll is the shortest pause between two reads of the head; a
	// slower catalog is read at most every twice the last read's duration.
	MinPoll = 5 * time.Millisecond
)

// Turn is the wait of one retry: how long it watched, whether the head
// moved meanwhile, and why it could not watch (Err, then it backed off).
type Turn struct {
	Waited time.Duration
	Moved  bool
	Reads  int
	Err    error
}

// Await waits before a retry: until the table's head moves from where it
// is now, for at most max(MaxWait, backoff); or backoff alone when head is
// nil or cannot be read. It returns false when ctx ends.
func Await(ctx context.Context, head HeadReader, ident table.Identifier, backoff time.Duration) (Turn, bool) {
	defer waiting.Begin(ctx, "retry: the other writer's next commit")()
	start := time.Now()
	if head == nil {
		return Turn{}, sleep(ctx, backoff)
	}
	deadline := start.Add(max(MaxWait, backoff))
	read := func() (string, time.Duration, error) {
		t := time.Now()
		loc, err := head.MetadataLocation(ctx, ident)
		return loc, time.Since(t), err
	}
	from, took, err := read()
	tu := Turn{Reads: 1}
	for err == nil && from != "" {
		pause := max(MinPoll, 2*took)
		if time.Now().Add(pause).After(deadline) {
			break
		}
		if !sleep(ctx, pause) {
			return tu, false
		}
		var loc string
		loc, took, err = read()
		tu.Reads++
		if err == nil && loc != from {
			tu.Moved, tu.Waited = true, time.Since(start)
			return tu, true
		}
	}
	if err != nil || from == "" {
		tu.Err = err
		deadline = start.Add(backoff)
	}
	ok := sleep(ctx, time.Until(deadline))
	tu.Waited = time.Since(start)
	return tu, ok
}

// sleep waits d; false, at once, when ctx ends first or has ended (a
// select over a zero timer and a done ctx would pick either).
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
