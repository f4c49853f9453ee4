package maintenance

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// conflictOnce is a catalog whose first commit loses to a writer: the
// writer's append lands, and the commit fails as a conflict.
type conflictOnce struct {
	Catalog
	once   sync.Once
	writer func() error
}

func (c *conflictOnce) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	var lost error
	c.once.Do(func() {
		if lost = c.writer(); lost == nil {
			lost = fmt.Errorf("%w: a writer committed first", table.ErrCommitFailed)
		}
	})
	if lost != nil {
		return nil, "", lost
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, ups)
}

// headWatch is a MetadataLocator whose head moves at the third read.
type headWatch struct {
	mu    sync.Mutex
	reads int
}

func (h *headWatch) MetadataLocation(context.Context, table.Identifier) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads++
	return fmt.Sprintf("v%d", min(h.reads/3, 1)), nil
}

// The runner hands compaction the catalog's head: a retry after a conflict
// watches it (and goes once it moves) rather than backing off blindly.
func TestCompactionRetryWatchesTheCatalogsHead(t *testing.T) {
	e := newEnv(t, 6)
	ident := e.opt.Identifier()
	var rows int64
	var sum uint64
	cat := &conflictOnce{Catalog: e.cat, writer: func() error {
		tbl, err := e.cat.LoadTable(t.Context(), ident)
		if err != nil {
			return err
		}
		if tbl, err = gen.Append(t.Context(), tbl, e.opt, 1, gen.NextAppendIndex(tbl)); err != nil {
			return err
		}
		rows, sum, err = gen.Checksum(t.Context(), tbl) // what the compaction must keep
		return err
	}}
	head := &headWatch{}
	d := e.runner(t, nil, nil)
	r := NewRunner(Deps{Catalog: cat, Policy: d.policy, Selected: d.selected, State: e.state, MetadataLocator: head})

	o := one(t, r.RunTable(t.Context(), ident, Request{Tasks: []string{TaskCompact}, Force: true}), TaskCompact)
	if o.Status != StatusSucceeded || o.Compact == nil || o.Compact.CommitRetries != 1 {
		t.Fatalf("outcome %+v; want it landed at the first retry", o)
	}
	if head.reads != 3 {
		t.Fatalf("%d reads of the catalog's head; want 3 (the retry went when it moved)", head.reads)
	}
	tbl, err := e.cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if r2, s2, err := gen.Checksum(t.Context(), tbl); err != nil || r2 != rows || s2 != sum || rows == 0 {
		t.Fatalf("after the compaction: %d rows (checksum %x, err %v); want the %d rows (%x) the writer left", r2, s2, err, rows, sum)
	}
}
