package compact

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// ErrClaimed: another replica has claimed the partition of a group, or
// compacted it since this run's plan; the group is left to it
// (Result.GroupsClaimedElsewhere), which is not a failure.
var ErrClaimed = errors.New("partition claimed by another replica")

// Claimer keeps several replicas that compact one table at once apart: a
// group is rewritten only once its partition is claimed, so the replicas
// share a table's partitions without rewriting the same files twice. The
// claims only avoid wasted work: a rewrite of files another replica replaced
// already fails Iceberg's validation at commit.
type Claimer interface {
	// Claim takes partition (a key of the spec id and the partition
	// values) for this run, or fails at once with an error wrapping
	// ErrClaimed when another replica holds it.
	Claim(ctx context.Context, partition string) (Claim, error)
}

// Claim is one held partition; *lock.Lease is one.
type Claim interface {
	// Context is cancelled when the claim is lost (and on Release).
	Context() context.Context
	// Lost is nil while the claim holds, else the cause of its loss.
	Lost() error
	Release(ctx context.Context) error
}

// CommitGate is entered around the commit attempts of each batch: replicas
// that share a table hold its lease only for their commits, so expiry and orphan removal,
// which hold it for their whole run, never overlap a commit.
type CommitGate interface {
	// Enter blocks until the commit may go ahead; it returns the context
	// the commit runs on and the func that leaves the gate.
	Enter(ctx context.Context) (context.Context, func(), error)
}

// claims are the partitions one run holds: groups of one partition share
// its claim, given back when the last of them is committed or failed.
type claims struct {
	c     Claimer
	ident table.Identifier // the table, which doneElsewhere re-loads
	mu    sync.Mutex
	held  map[string]*heldClaim // by partition key
	by    map[*Group]string     // the groups holding a reference
}

type heldClaim struct {
	claim Claim
	refs  int
}

// take claims g's partition for g (sharing a claim its partition already
// has in this run).
func (cs *claims) take(ctx context.Context, g *Group) (Claim, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if h := cs.held[g.key]; h != nil {
		if lost := h.claim.Lost(); lost != nil {
			// Another replica may hold the partition now.
			return nil, fmt.Errorf("the claim was lost: %w", lost)
		}
		h.refs++
		cs.by[g] = g.key
		return h.claim, nil
	}
	c, err := cs.c.Claim(ctx, g.key)
	if err != nil {
		return nil, err
	}
	cs.held[g.key] = &heldClaim{claim: c, refs: 1}
	cs.by[g] = g.key
	return c, nil
}

// lost is the cause when g's claim no longer holds, else nil.
func (cs *claims) lost(g *Group) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if key, ok := cs.by[g]; ok {
		if h := cs.held[key]; h != nil {
			return h.claim.Lost()
		}
	}
	return nil
}

// done drops g's reference, releasing the claim after the last one.
func (cs *claims) done(g *Group) {
	cs.mu.Lock()
	key, ok := cs.by[g]
	delete(cs.by, g)
	h := cs.held[key]
	if !ok || h == nil {
		cs.mu.Unlock()
		return
	}
	h.refs--
	if h.refs > 0 {
		cs.mu.Unlock()
		return
	}
	delete(cs.held, key)
	cs.mu.Unlock()
	_ = h.claim.Release(context.Background()) // a lost one frees nothing; it expires anyway
}

// releaseAll gives back whatever is still held when the run ends.
func (cs *claims) releaseAll(ctx context.Context) {
	cs.mu.Lock()
	held := cs.held
	cs.held, cs.by = map[string]*heldClaim{}, map[*Group]string{}
	cs.mu.Unlock()
	for _, h := range held {
		_ = h.claim.Release(context.WithoutCancel(ctx))
	}
}

// claimAndRewrite rewrites g once its partition is claimed (at once without
// a Claimer), on a context the claim's loss cancels.
func (e *executor) claimAndRewrite(ctx context.Context, g *Group) groupOutput {
	if e.claims == nil {
		return e.rewriteGroup(ctx, g)
	}
	c, err := e.claims.take(ctx, g)
	if err != nil {
		if !errors.Is(err, ErrClaimed) {
			err = fmt.Errorf("claim partition %s: %w", g.Partition, err)
		}
		return groupOutput{g: g, err: err}
	}
	if by := e.doneElsewhere(c.Context(), g); by != 0 {
		return groupOutput{g: g, err: fmt.Errorf("%w: snapshot %d compacted it after this run's plan", ErrClaimed, by)}
	}
	out := e.rewriteGroup(c.Context(), g)
	if lost := c.Lost(); lost != nil && out.err != nil {
		out.err = fmt.Errorf("stopped: the claim of partition %s was lost: %w", g.Partition, lost)
	}
	return out
}

// skipClaimed counts a group whose partition another replica holds, and
// says so: it is neither committed nor failed here.
func (e *executor) skipClaimed(out groupOutput) bool {
	if !errors.Is(out.err, ErrClaimed) {
		return false
	}
	e.releaseClaim(out.g)
	e.res.GroupsClaimedElsewhere++
	e.log.Debug("group left to the replica that claimed its partition", "partition", out.g.Partition)
	return true
}

// enterGate enters the commit gate for the attempts of one batch (the
// gate's lease is held through their retries, so the replicas sharing the
// table do not keep moving its head under each other). Without a gate it
// returns ctx.
func (e *executor) enterGate(ctx context.Context) (context.Context, func(), error) {
	if e.opts.Gate == nil {
		return ctx, func() {}, nil
	}
	gctx, leave, err := e.opts.Gate.Enter(ctx)
	if err != nil {
		return ctx, nil, fmt.Errorf("enter the commit gate: %w", err)
	}
	return gctx, leave, nil
}

// dropLost drops from the batch, uncommitted, the groups whose claim was
// lost: another replica may be rewriting those files now.
func (e *executor) dropLost(batch []groupOutput) []groupOutput {
	if e.claims == nil {
		return batch
	}
	kept := batch[:0:0]
	for _, out := range batch {
		if lost := e.claims.lost(out.g); lost != nil {
			e.discard(out, fmt.Errorf("the claim of partition %s was lost before its commit: %w", out.g.Partition, lost))
			continue
		}
		kept = append(kept, out)
	}
	return kept
}

// releaseClaim gives g's share of its claim back: g was committed or failed.
func (e *executor) releaseClaim(g *Group) {
	if e.claims != nil {
		e.claims.done(g)
	}
}

func newClaims(c Claimer, ident table.Identifier) *claims {
	if c == nil {
		return nil
	}
	return &claims{c: c, ident: ident, held: map[string]*heldClaim{}, by: map[*Group]string{}}
}

// summaryPartitions lists, in the summary of a compaction that shares its
// table, the partitions it rewrote: a hash of each partition key, in hex,
// comma-separated. A replica that claims a partition after another one
// compacted it since its own plan finds it there, with no manifest read.
const summaryPartitions = "maintainer.partitions"

func partitionHash(key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// markPartitions names the batch's partitions in its summary when the run
// shares the table.
func (e *executor) markPartitions(props iceberg.Properties, batch []groupOutput) {
	if e.claims == nil {
		return
	}
	var hs []string
	for _, out := range batch {
		hs = append(hs, partitionHash(out.g.key))
	}
	slices.Sort(hs)
	props[summaryPartitions] = strings.Join(slices.Compact(hs), ",")
}

// doneElsewhere is the snapshot of another run that compacted g's partition
// after this run's plan (0 when none, or when the table cannot be re-loaded:
// the commit's validation still catches a rewrite of replaced files). It is
// asked once the partition is claimed, so no such commit can land after the
// answer while the claim holds.
func (e *executor) doneElsewhere(ctx context.Context, g *Group) int64 {
	fresh, err := e.cat.LoadTable(ctx, e.claims.ident)
	if err != nil {
		e.log.Warn("re-load before rewriting a claimed partition; going on", "partition", g.Partition, "err", err)
		return 0
	}
	want := partitionHash(g.key)
	meta := fresh.Metadata()
	for s := fresh.CurrentSnapshot(); s != nil && s.SnapshotID != e.plan.SnapshotID; s = parent(meta, s) {
		if s.Summary == nil || s.Summary.Properties[tableprops.SummaryRunID] == e.opts.RunID {
			continue
		}
		if slices.Contains(strings.Split(s.Summary.Properties[summaryPartitions], ","), want) {
			return s.SnapshotID
		}
	}
	return 0
}
