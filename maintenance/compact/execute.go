package compact

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/iceberg-maintainer/maintainer/internal/commitconflict"
	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/turn"
)

// Sentinel errors; callers classify with errors.Is.
var (
	// ErrRowCountMismatch: a group wrote a different number of rows than
	// it read. Nothing of that group is committed.
	ErrRowCountMismatch = errors.New("row count mismatch")
	// ErrConflict: a concurrent commit removed or added deletes against
	// files of the group; the group is abandoned cleanly.
	ErrConflict = errors.New("conflicting concurrent commit")
	// ErrCommitUnknown: the catalog did not say whether a commit landed.
	// The written files are kept: they may be live.
	ErrCommitUnknown = errors.New("commit outcome unknown")
)

// TableLoader re-loads a table; the catalog satisfies it.
type TableLoader interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// Options carry what Execute needs besides the plan.
type Options struct {
	Logger *slog.Logger
	// RunID tags the snapshots of this run; a new UUID when empty.
	RunID string
	// ArrowBatchRows and WriteBufferBatches bound the memory of one group:
	// roughly (2 + WriteBufferBatches) batches of ArrowBatchRows rows.
	ArrowBatchRows     int
	WriteBufferBatches int
	// Allocator backs the buffers of the direct path's Parquet writers,
	// which hold a row group of pages until it is written (nil: the Go
	// heap); each output file takes its own from it.
	Allocator WriterAllocator
	// Claims and Gate let several replicas compact one table (claim.go);
	// nil: this run is the table's only compaction.
	Claims Claimer
	Gate   CommitGate
	// Head reads the table's head cheaply, so that a retry after a
	// conflict starts right after the other writer's next commit
	// (internal/turn); nil: retries back off.
	Head turn.HeadReader
	// Swap commits a v1 or v2 rewrite by compare-and-set on the
	// catalog's pointer, on the metadata the rewrite was built on
	// (internal/metacommit), instead of the catalog's commit, which
	// parses the table again first; nil: the catalog's commit.
	Swap metacommit.Swapper

	// scanChunk is how many tasks one iceberg-go scan of a group reads
	// (0: readChunk); tests lower it to read a small group in chunks.
	scanChunk int
}

// Result is what a compaction run did.
type Result struct {
	GroupsCommitted    int
	GroupsFailed       []GroupFailure
	FilesRewritten     int   // input data files replaced
	BytesRewritten     int64 // their bytes
	FilesWritten       int
	BytesWritten       int64
	RowsRead           int64
	RowsWritten        int64
	DeleteFilesDropped int
	Commits            []int64 // snapshot ids committed, oldest first
	CommitRetries      int
	// GroupsClaimedElsewhere were left to the replicas that claimed their
	// partitions (Options.Claims).
	GroupsClaimedElsewhere int
}

// GroupFailure records one group that was not committed, and why.
type GroupFailure struct {
	Partition string
	Files     int
	Err       error
}

type groupOutput struct {
	g        *Group
	files    []iceberg.DataFile
	rowsRead int64
	err      error
}

// Execute rewrites the plan's groups and commits them. Groups are rewritten
// MaxConcurrentGroups at a time; each group's rows are counted as they are
// read and compared with the rows in the files written before the group can
// be committed. Without partial progress all groups land in one snapshot or
// none does; with it, groups land in up to MaxCommits batches.
//
// The returned error is non-nil when any group failed or the run was
// cancelled; Result says what did land.
func Execute(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, opts Options) (*Result, error) {
	return execute(ctx, cat, tbl, plan, cfg, opts, defaultPaths())
}

// execute is Execute trying the given paths for each group, in order.
func execute(ctx context.Context, cat TableLoader, tbl *table.Table, plan *Plan, cfg Config, opts Options, paths []rewritePath) (*Result, error) {
	res := &Result{}
	if plan.Empty() {
		return res, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RunID == "" {
		opts.RunID = uuid.NewString()
	}
	if opts.ArrowBatchRows <= 0 {
		opts.ArrowBatchRows = 16384
	}
	if opts.WriteBufferBatches <= 0 {
		opts.WriteBufferBatches = 4
	}
	if opts.scanChunk <= 0 {
		opts.scanChunk = readChunk
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return res, fmt.Errorf("open table IO: %w", err)
	}
	e := &executor{cat: cat, fs: fs, plan: plan, cfg: cfg, opts: opts, res: res, current: tbl,
		changes: map[int64]*snapshotChanges{}, landed: map[*Group]bool{}, deadDropped: map[string]bool{},
		claims: newClaims(opts.Claims, tbl.Identifier()),
		log:    opts.Logger.With("table", strings.Join(tbl.Identifier(), "."), "task", "compact")}
	paths = withSortPath(plan, paths)
	e.paths = buildPaths(&pathEnv{tbl: tbl, fs: fs, sizes: plan.fileSizes(), opts: opts, sort: plan.sort,
		rowGroupCap: cfg.rowGroupCap(len(plan.Groups))}, paths)
	if e.claims != nil {
		defer e.claims.releaseAll(ctx)
	}

	// Groups are written by a bounded pool; the committer takes them in
	// completion order. The pool stops early, with the cause, once
	// max_failed_commits is reached.
	rctx, stopRewrites := context.WithCancelCause(ctx)
	defer stopRewrites(nil)
	outputs := make(chan groupOutput)
	sem := make(chan struct{}, cfg.MaxConcurrentGroups)
	var wg sync.WaitGroup
	go func() {
		for i := range plan.Groups {
			g := &plan.Groups[i]
			select {
			case sem <- struct{}{}:
			case <-rctx.Done():
				outputs <- groupOutput{g: g, err: context.Cause(rctx)}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				outputs <- e.claimAndRewrite(rctx, g)
			}()
		}
		wg.Wait()
		close(outputs)
	}()

	perCommit := len(plan.Groups)
	if cfg.PartialProgress {
		perCommit = (len(plan.Groups) + cfg.MaxCommits - 1) / cfg.MaxCommits
	}
	var batch []groupOutput
	var failed bool
	var failedCommits int
	var stopped error // why no more batches are committed: max_failed_commits
	for out := range outputs {
		if e.skipClaimed(out) {
			continue
		}
		if out.err != nil && ctx.Err() != nil && errors.Is(out.err, context.Canceled) {
			// Say why it stopped (a lost lease, shutdown), not just that it did.
			out.err = fmt.Errorf("stopped: %w", context.Cause(ctx))
		}
		if stopped != nil && ctx.Err() == nil &&
			(out.err == nil || errors.Is(out.err, stopped) || errors.Is(out.err, context.Canceled)) {
			// Written, or cut short, after the limit: dropped for it.
			e.discard(out, stopped)
			continue
		}
		if out.err != nil {
			failed = true
			e.fail(out, out.err)
			continue
		}
		e.log.Info("group rewritten", "partition", out.g.Partition, "files_in", out.g.Files,
			"files_out", len(out.files), "rows", out.rowsRead)
		if !cfg.PartialProgress && failed {
			// All or nothing: a failed group dooms the whole commit.
			e.discard(out, errors.New("another group of this atomic rewrite failed"))
			continue
		}
		batch = append(batch, out)
		if cfg.PartialProgress && len(batch) >= perCommit {
			if !e.commit(ctx, batch) {
				failedCommits++
				if cfg.MaxFailedCommits > 0 && failedCommits >= cfg.MaxFailedCommits {
					stopped = fmt.Errorf("not committed: %d batch commit(s) failed, max_failed_commits=%d", failedCommits, cfg.MaxFailedCommits)
					e.log.Error("compaction stops: too many failed commits", "failed_commits", failedCommits)
					stopRewrites(stopped)
				}
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		switch {
		case stopped != nil:
			for _, out := range batch {
				e.discard(out, stopped)
			}
		case !cfg.PartialProgress && failed:
			for _, out := range batch {
				e.discard(out, errors.New("another group of this atomic rewrite failed"))
			}
		default:
			e.commit(ctx, batch)
		}
	}
	if len(res.GroupsFailed) > 0 {
		errs := make([]error, 0, len(res.GroupsFailed))
		for _, f := range res.GroupsFailed {
			errs = append(errs, fmt.Errorf("group %s: %w", f.Partition, f.Err))
		}
		return res, fmt.Errorf("%d of %d groups not committed: %w", len(res.GroupsFailed), len(plan.Groups), errors.Join(errs...))
	}
	return res, nil
}

type executor struct {
	cat     TableLoader
	fs      iceio.IO
	plan    *Plan
	cfg     Config
	opts    Options
	res     *Result
	log     *slog.Logger
	current *table.Table
	batches int
	// changes caches what each snapshot committed since the plan holds,
	// read once per run however many attempts check it.
	changes map[int64]*snapshotChanges
	// paths rewrite groups: each is tried in turn until one takes the group.
	paths []rewriter
	// claims are the partitions this run holds (nil: no Claimer).
	claims *claims
	// landed are the groups committed so far; deadDropped the delete
	// files their commits removed; deadDeps, built on the first commit,
	// the groups each dead delete of the plan waits for (deadGroups).
	landed      map[*Group]bool
	deadDropped map[string]bool
	deadDeps    map[string][]*Group
}

// buildPaths builds the rewriters of one run over one table.
func buildPaths(env *pathEnv, paths []rewritePath) []rewriter {
	out := make([]rewriter, len(paths))
	for i, p := range paths {
		out[i] = p(env)
	}
	return out
}

// rewriteGroup reads one group with its deletes applied and writes it out
// again through the first path that takes it, counting rows on both sides,
// then verifies the counts.
func (e *executor) rewriteGroup(ctx context.Context, g *Group) (out groupOutput) {
	out.g = g
	if ctx.Err() != nil {
		out.err = context.Cause(ctx)
		return out
	}
	in := &groupInput{g: g}
	var path string
	var whys []string
	for _, p := range e.paths {
		files, rows, err := p.rewrite(ctx, in)
		if d := (*declined)(nil); errors.As(err, &d) {
			e.removeFiles(files) // a path declines before it writes: none, if any
			whys = append(whys, p.name()+": "+d.why)
			continue
		}
		path, out.files, out.rowsRead, out.err = p.name(), files, rows, err
		break
	}
	why := strings.Join(whys, "; ")
	if path == "" {
		out.err = fmt.Errorf("no rewrite path takes the group: %s", why)
	}
	e.log.Debug("group read and written", "partition", g.Partition, "path", path, "why", why)
	if out.err == nil {
		out.err = e.verify(g, out.files, out.rowsRead)
	}
	if out.err != nil {
		e.removeFiles(out.files)
		out.files = nil
	}
	return out
}

// verify checks the rows written against the rows read, reading the row
// count of every written file back from its Parquet footer.
func (e *executor) verify(g *Group, files []iceberg.DataFile, readRows int64) error {
	var written int64
	for _, df := range files {
		n, err := parquetRows(e.fs, df.FilePath())
		if err != nil {
			return fmt.Errorf("verify written file %s: %w", df.FilePath(), err)
		}
		if n != df.Count() {
			return fmt.Errorf("%w: file %s holds %d rows, its metadata says %d", ErrRowCountMismatch, df.FilePath(), n, df.Count())
		}
		written += n
	}
	if written != readRows {
		return fmt.Errorf("%w: read %d live rows, wrote %d", ErrRowCountMismatch, readRows, written)
	}
	if g.DeleteFiles == 0 && readRows != g.Records {
		return fmt.Errorf("%w: input files hold %d rows and have no deletes, but %d were read", ErrRowCountMismatch, g.Records, readRows)
	}
	if readRows > g.Records {
		return fmt.Errorf("%w: read %d rows from files holding %d", ErrRowCountMismatch, readRows, g.Records)
	}
	return nil
}

func parquetRows(fs iceio.IO, path string) (int64, error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return 0, err
	}
	defer rdr.Close()
	return rdr.NumRows(), nil
}

func (e *executor) fail(out groupOutput, err error) {
	e.releaseClaim(out.g)
	e.res.GroupsFailed = append(e.res.GroupsFailed, GroupFailure{Partition: out.g.Partition, Files: out.g.Files, Err: err})
	if !errors.Is(err, context.Canceled) {
		e.log.Error("group not committed", "partition", out.g.Partition, "err", err)
	}
}

// discard drops a group that will definitely not be committed, deleting
// only the files this run wrote for it.
func (e *executor) discard(out groupOutput, err error) {
	e.removeFiles(out.files)
	e.fail(out, err)
}

func (e *executor) removeFiles(files []iceberg.DataFile) {
	for _, df := range files {
		if err := e.fs.Remove(df.FilePath()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			e.log.Warn("could not remove a file this run wrote; the orphan pass will", "path", df.FilePath(), "err", err)
		}
	}
}

// commit lands one batch of rewritten groups. After a conflict it re-loads
// the table, checks what was committed since the plan, drops the groups
// that conflict with it and re-applies the rest of the rewrite on the new
// base, up to CommitRetries times. It reports whether a commit landed.
func (e *executor) commit(ctx context.Context, batch []groupOutput) (landed bool) {
	e.batches++
	batchID := strconv.Itoa(e.batches)
	var st *stagedRewrite // the rewrite as last built, for a retry to re-apply
	var dead []iceberg.DataFile
	deadKnown := false
	ctx, leave, err := e.enterGate(ctx)
	if err != nil {
		for _, out := range batch {
			e.discard(out, err)
		}
		return
	}
	defer leave()
	e.refresh(ctx)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			// A cancelled run (lost lease, shutdown) commits nothing more.
			e.dropStaged(st)
			for _, out := range batch {
				e.discard(out, context.Cause(ctx))
			}
			return false
		}
		var conflicted []groupOutput
		batch, conflicted = e.dropConflicts(ctx, batch)
		for _, out := range conflicted {
			e.discard(out, out.err)
		}
		if len(batch) == 0 {
			return false
		}
		if ctx.Err() != nil {
			continue // cancelled during the walk: the check above discards
		}
		if len(conflicted) > 0 {
			// The staged rewrite holds groups that are gone, and the
			// deletes it removes were dead for all of them.
			e.dropStaged(st)
			st, deadKnown = nil, false
		}
		if kept := e.dropLost(batch); len(kept) < len(batch) {
			e.dropStaged(st)
			batch, st, deadKnown = kept, nil, false // st holds groups that are gone
			if len(batch) == 0 {
				return
			}
		}
		snap, err := e.attempt(ctx, batch, batchID, attempt, &st, &dead, &deadKnown)
		if err == nil {
			e.recordCommit(batch, snap, dead)
			return true
		}
		if errors.Is(err, errStage) {
			// Nothing was sent: reading the new snapshots or writing the
			// rewrite's metadata failed (the error names the file), which
			// is no conflict and which no retry mends.
			e.dropStaged(st)
			for _, out := range batch {
				e.discard(out, err)
			}
			return false
		}
		if isDefiniteFailure(err) && attempt < e.cfg.CommitRetries {
			e.res.CommitRetries++
			e.log.Warn("compaction commit conflicted; re-loading and retrying", "attempt", attempt+1, "err", err)
			tu, ok := e.awaitTurn(ctx, attempt)
			if !ok {
				continue // the ctx check above discards the batch
			}
			if tu.Moved {
				e.log.Debug("retrying right after the table's next commit", "waited", tu.Waited, "head_reads", tu.Reads)
			}
			fresh, lerr := e.cat.LoadTable(ctx, e.current.Identifier())
			if lerr != nil {
				e.unknown(batch, fmt.Errorf("re-load after conflict: %w", lerr))
				return false
			}
			e.current = fresh
			continue
		}
		if isDefiniteFailure(err) {
			e.dropStaged(st)
			for _, out := range batch {
				e.discard(out, fmt.Errorf("%w: gave up after %d attempts: %v", ErrConflict, attempt+1, err))
			}
			return false
		}
		// The catalog may or may not have taken the commit: find out by
		// looking for our snapshot, and never delete files that may be live.
		if snap := e.findOwnSnapshot(ctx, batchID); snap != nil {
			e.recordCommit(batch, snap, dead)
			return true
		}
		e.unknown(batch, err)
		return false
	}
}

// refresh re-loads the table before a batch's first attempt. The table as
// planned, or as the last batch left it, is as old as the rewrite (seconds):
// beside a writer committing more often than that, a first attempt on it
// conflicts for certain and uses up a retry, and a batch after a failed one
// would start from the base its last attempt lost on. A failed load leaves
// e.current, which the attempt's conflict check handles as any stale base.
func (e *executor) refresh(ctx context.Context) {
	if e.current.CurrentSnapshot() == nil {
		return
	}
	fresh, err := e.cat.LoadTable(ctx, e.current.Identifier())
	if err != nil {
		if ctx.Err() == nil { // cancelled: the caller's check discards the batch
			e.log.Warn("re-load before committing; trying on the table as last loaded", "err", err)
		}
		return
	}
	e.current = fresh
}

// attempt makes one commit of the batch on e.current: it re-applies the
// staged rewrite st when there is one, or builds it (again) and stages it
// for the next attempt.
func (e *executor) attempt(ctx context.Context, batch []groupOutput, batchID string, attempt int,
	st **stagedRewrite, dead *[]iceberg.DataFile, deadKnown *bool) (*table.Snapshot, error) {
	if !*deadKnown {
		*dead, *deadKnown = e.deadFor(batch), true
	}
	still, err := e.stillDead(*dead)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStage, err)
	}
	if len(still) != len(*dead) {
		e.dropStaged(*st)
		*st = nil // it removes a delete file that is live again, or gone
	}
	*dead = still
	if *st != nil {
		snap, err := e.reapply(ctx, *st, attempt)
		if !errors.Is(err, errRebuild) {
			return snap, err
		}
		e.log.Info("building the rewrite again on the new base", "err", err)
		e.dropStaged(*st)
		*st = nil
	}
	next, snap, err := e.build(ctx, batch, batchID, *dead)
	*st = next
	return snap, err
}

// deadFor returns the delete files the batch's commit removes: those the
// plan found dead whose groups (deadGroups) have all landed once this
// batch does, less those an earlier batch removed. It reads nothing, so a
// run of many batches beside a fast writer does not re-read the table's
// manifests for each (stillDead checks what was committed since the plan).
func (e *executor) deadFor(batch []groupOutput) []iceberg.DataFile {
	if !e.cfg.RemoveDeadDeletes || len(e.plan.DeadDeletes) == 0 {
		return nil
	}
	if e.deadDeps == nil {
		e.deadDeps = deadGroups(e.plan, e.current.Metadata())
	}
	in := make(map[*Group]bool, len(batch))
	for _, out := range batch {
		in[out.g] = true
	}
	var dead []iceberg.DataFile
	for _, d := range e.plan.DeadDeletes {
		if e.deadDropped[d.FilePath()] {
			continue
		}
		if !slices.ContainsFunc(e.deadDeps[d.FilePath()], func(g *Group) bool { return !in[g] && !e.landed[g] }) {
			dead = append(dead, d)
		}
	}
	return dead
}

// deadGroups maps each delete file the plan found dead to the groups that
// hold a data file it may apply to, by Iceberg's rules: the file a
// file-scoped position delete names; otherwise every file of its partition
// (of its spec), or of every partition for a delete of an unpartitioned
// spec; and the groups whose scan tasks applied it. The plan found it dead
// because every such file is rewritten, so it may go once these groups have
// landed: the rewritten rows keep the planned sequence number, which it
// cannot apply to (equality deletes apply to older rows only, position
// deletes to the files they name).
func deadGroups(plan *Plan, meta table.Metadata) map[string][]*Group {
	byPath := map[string]*Group{}
	byKey := map[string][]*Group{}
	applied := map[string][]*Group{}
	all := make([]*Group, len(plan.Groups))
	for i := range plan.Groups {
		g := &plan.Groups[i]
		all[i] = g
		byKey[g.key] = append(byKey[g.key], g)
		for t := range g.files.all() {
			byPath[t.File.FilePath()] = g
			for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
				if gs := applied[d.FilePath()]; len(gs) == 0 || gs[len(gs)-1] != g {
					applied[d.FilePath()] = append(gs, g)
				}
			}
		}
	}
	deps := make(map[string][]*Group, len(plan.DeadDeletes))
	for _, d := range plan.DeadDeletes {
		gs := slices.Clone(applied[d.FilePath()])
		spec := meta.PartitionSpecByID(int(d.SpecID()))
		switch ref := referencedPath(d); {
		case ref != "":
			if g := byPath[ref]; g != nil {
				gs = append(gs, g)
			}
		case spec != nil && !spec.IsUnpartitioned():
			gs = append(gs, byKey[partitionKey(d.SpecID(), d.Partition())]...)
		default: // global, or of a spec the table no longer knows
			gs = all
		}
		deps[d.FilePath()] = gs
	}
	return deps
}

func (e *executor) unknown(batch []groupOutput, err error) {
	for _, out := range batch {
		e.fail(out, fmt.Errorf("%w: %v (written files kept; the orphan pass removes them if they are not live)", ErrCommitUnknown, err))
	}
}

// build builds the rewrite of the batch on e.current (commit.go, or
// through iceberg-go where that does not write it) and commits it; when the commit loses a race, the staged rewrite is
// returned for the next attempt to re-apply.
func (e *executor) build(ctx context.Context, batch []groupOutput, batchID string, dead []iceberg.DataFile) (*stagedRewrite, *table.Snapshot, error) {
	if e.ownCommit() {
		return e.buildOwn(ctx, batch, batchID, dead)
	}
	base := e.current.CurrentSnapshot()
	txn := e.current.NewTransaction()
	props := iceberg.Properties{}
	e.markers(props, batch, batchID)
	rw := txn.NewRewrite(props)
	// Keep the data sequence number of the planned snapshot, as Spark's
	// use-starting-sequence-number does: equality deletes committed by a
	// writer after the plan still apply to the rewritten rows.
	if e.plan.FormatVersion >= 2 {
		rw.DataSequenceNumber(e.plan.SequenceNumber)
	}
	staged := map[string]bool{}
	for _, out := range batch {
		safe := safeDeletionVectors(out.g)
		rw.ApplyResult(table.CompactionGroupResult{
			PartitionKey:        out.g.Partition,
			OldDataFiles:        groupFiles(out.g),
			NewDataFiles:        out.files,
			SafeDeletionVectors: safe,
		})
		for _, dv := range safe {
			staged[dv.FilePath()] = true
		}
	}
	for _, d := range dead {
		if !staged[d.FilePath()] {
			staged[d.FilePath()] = true
			rw.DeleteFile(d)
		}
	}
	if err := rw.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errStage, err)
	}
	next, err := txn.Commit(ctx)
	if err != nil {
		if isDefiniteFailure(err) {
			return e.stage(txn, base), nil, err
		}
		return nil, nil, err
	}
	e.current = next
	return nil, next.CurrentSnapshot(), nil
}

var errStage = errors.New("stage rewrite")

// markers tag a batch's snapshot as this run's compaction.
func (e *executor) markers(props iceberg.Properties, batch []groupOutput, batchID string) {
	props[tableprops.SummaryOperation] = "compact"
	props[tableprops.SummaryRunID] = e.opts.RunID
	props[tableprops.SummaryBatch] = batchID
	e.markPartitions(props, batch)
}

// isDefiniteFailure reports errors after which the commit certainly did not
// land: conflicts the catalog reported and failed requirements, never an
// unanswered commit (commitconflict.Is). (Staging errors, before anything
// was sent, fail the batch at once: errStage.)
func isDefiniteFailure(err error) bool { return commitconflict.Is(err) }

func (e *executor) recordCommit(batch []groupOutput, snap *table.Snapshot, dead []iceberg.DataFile) {
	e.res.DeleteFilesDropped += len(dead)
	for _, d := range dead {
		e.deadDropped[d.FilePath()] = true
	}
	for _, out := range batch {
		e.landed[out.g] = true
		e.releaseClaim(out.g)
		e.res.GroupsCommitted++
		e.res.FilesRewritten += out.g.Files
		e.res.BytesRewritten += out.g.Bytes
		e.res.FilesWritten += len(out.files)
		e.res.RowsRead += out.rowsRead
		for _, df := range out.files {
			e.res.BytesWritten += df.FileSizeBytes()
			e.res.RowsWritten += df.Count()
		}
	}
	if snap != nil {
		e.res.Commits = append(e.res.Commits, snap.SnapshotID)
		e.log.Info("compaction committed", "snapshot_id", snap.SnapshotID, "groups", len(batch))
	}
}

// findOwnSnapshot re-loads the table and looks for the snapshot this run
// committed for a batch.
func (e *executor) findOwnSnapshot(ctx context.Context, batchID string) *table.Snapshot {
	fresh, err := e.cat.LoadTable(context.WithoutCancel(ctx), e.current.Identifier())
	if err != nil {
		return nil
	}
	s := tableprops.RunSnapshot(fresh.Metadata(), e.opts.RunID, batchID)
	if s != nil {
		e.current = fresh
	}
	return s
}

func parent(meta table.Metadata, s *table.Snapshot) *table.Snapshot {
	if s.ParentSnapshotID == nil {
		return nil
	}
	return meta.SnapshotByID(*s.ParentSnapshotID)
}

// groupFiles returns the data files g rewrites.
func groupFiles(g *Group) []iceberg.DataFile {
	out := make([]iceberg.DataFile, 0, g.files.len())
	for t := range g.files.all() {
		out = append(out, t.File)
	}
	return out
}

// safeDeletionVectors are the deletion vectors g's commit removes with its
// files: those that name one of them (iceberg-go's rule, of
// table.CollectSafeDeletionVectors).
func safeDeletionVectors(g *Group) []iceberg.DataFile {
	var tasks []table.FileScanTask
	for t := range g.files.all() {
		if len(t.DeletionVectorFiles) > 0 {
			tasks = append(tasks, t)
		}
	}
	return table.CollectSafeDeletionVectors(tasks)
}

// backoff is the wait before re-loading after the attempt-th conflict when
// the catalog's head cannot be watched (turn.go). The first two retries do
// not wait: a retry costs little, and waiting blindly does not bring the
// writer's next commit closer. Later ones back off, to spare the catalog
// when a writer commits continuously.
func backoff(attempt int) time.Duration {
	if attempt < 2 {
		return 0
	}
	return min(100*time.Millisecond<<(attempt-2), 5*time.Second)
}
