package maintenance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/maintenance/manifests"
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

// The runner hands each committing task the catalog's head: a retry after
// a conflict watches it (and goes once it moves) rather than backing off
// blindly, and the rows the writer left are kept.
func TestRetriesWatchTheCatalogsHead(t *testing.T) {
	for _, task := range []string{TaskCompact, TaskManifests, TaskExpire} {
		t.Run(task, func(t *testing.T) {
			e := newEnv(t, 6)
			e.policy.Manifests = manifests.DefaultConfig()
			e.policy.Manifests.MinManifests = 2
			e.policy.Expire.Enabled, e.policy.Expire.RetainLast, e.policy.Expire.MaxSnapshotAge = true, 1, time.Millisecond
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
				rows, sum, err = gen.Checksum(t.Context(), tbl) // what the task must keep
				return err
			}}
			head := &headWatch{}
			d := e.runner(t, nil, nil)
			r := NewRunner(Deps{Catalog: cat, Policy: d.policy, Selected: d.selected, State: e.state, MetadataLocator: head})

			o := one(t, r.RunTable(t.Context(), ident, Request{Tasks: []string{task}, Force: true}), task)
			if o.Status != StatusSucceeded || retries(o) != 1 {
				t.Fatalf("outcome %+v (%d retries); want it landed at the first retry", o, retries(o))
			}
			if head.reads != 3 {
				t.Fatalf("%d reads of the catalog's head; want 3 (the retry went when it moved)", head.reads)
			}
			tbl, err := e.cat.LoadTable(t.Context(), ident)
			if err != nil {
				t.Fatal(err)
			}
			if r2, s2, err := gen.Checksum(t.Context(), tbl); err != nil || r2 != rows || s2 != sum || rows == 0 {
				t.Fatalf("after the run: %d rows (checksum %x, err %v); want the %d rows (%x) the writer left", r2, s2, err, rows, sum)
			}
		})
	}
}

func retries(o Outcome) int {
	switch {
	case o.Compact != nil:
		return o.Compact.CommitRetries
	case o.Manifests != nil:
		return o.Manifests.CommitRetries
	case o.Expire != nil && o.Expire.Result != nil:
		return o.Expire.Result.CommitRetries
	}
	return -1
}
