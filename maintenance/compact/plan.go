package compact

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	icecompaction "github.com/apache/iceberg-go/table/compaction"

	"github.com/iceberg-maintainer/maintainer/internal/manifestscan"
	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
)

// Plan is what one compaction run will do to one table. It is a value: the
// plan that `plan` and `--dry-run` show is the plan that Execute runs.
type Plan struct {
	// SnapshotID and SequenceNumber identify the snapshot of the main branch
	// the plan was made from; commits validate against it.
	SnapshotID     int64
	SequenceNumber int64
	FormatVersion  int

	TargetFileSize int64
	TargetSource   string // "config", "table property" or "default"
	MinFileSize    int64
	MaxFileSize    int64

	// Groups are rewritten, in this order, each into files of the target size.
	Groups []Group
	// Partitions says, for every partition holding data files, what the
	// planner decided and why.
	Partitions []PartitionDecision
	// DeadDeletes are delete files that apply to no live data file after
	// the rewrite; they are dropped in the same commit.
	DeadDeletes []iceberg.DataFile

	DataFiles   int   // live data files seen by the planner
	DataBytes   int64 // their bytes
	DeleteFiles int   // live delete files attached to them

	sort *sortSpec // the order files are written in; nil: bin-pack (sortorder.go)
}

// Group is a set of data files of one partition that are rewritten together.
type Group struct {
	Partition   string `json:"partition"` // e.g. "event_time_day=2024-01-02"
	SpecID      int    `json:"spec_id"`
	Files       int    `json:"files"`
	Bytes       int64  `json:"bytes"`
	Records     int64  `json:"records"` // rows in the input files before deletes
	DeleteFiles int    `json:"delete_files"`
	EstOutput   int    `json:"estimated_output_files"`
	Reason      string `json:"reason"`

	key   string
	files *fileList // the data files rewritten, as scan tasks
	// rowBytes is the expected output bytes per input row, which the
	// writers start from to spread the rows over EstOutput files.
	rowBytes float64
}

// PartitionDecision is the planner's verdict on one partition.
type PartitionDecision struct {
	Partition string `json:"partition"`
	SpecID    int    `json:"spec_id"`
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
	Groups    int    `json:"groups"`            // groups planned in this partition
	Skipped   string `json:"skipped,omitempty"` // why nothing (or not everything) is rewritten here

	key string
}

// Skip reasons, stable strings that tests and users can rely on.
const (
	ReasonOptimal        = "all files within the target size range"
	ReasonTooFewFiles    = "fewer candidate files than min_input_files"
	ReasonSingleFile     = "one small file, nothing to merge it with"
	ReasonNoProgress     = "rewriting would not reduce the file count"
	ReasonRecentlyWrite  = "written within skip_partitions_written_within"
	ReasonBudget         = "over max_bytes_per_run"
	ReasonFileBudget     = "over max_files_to_rewrite"
	ReasonNoSnapshot     = "table has no snapshot"
	ReasonDisabled       = "compaction disabled"
	ReasonNothingToWrite = "no partition needs compaction"
)

// Empty reports whether the plan rewrites nothing and drops nothing.
func (p *Plan) Empty() bool { return len(p.Groups) == 0 && len(p.DeadDeletes) == 0 }

// InputFiles and InputBytes sum the groups.
func (p *Plan) InputFiles() (n int) {
	for _, g := range p.Groups {
		n += g.Files
	}
	return n
}

func (p *Plan) InputBytes() (n int64) {
	for _, g := range p.Groups {
		n += g.Bytes
	}
	return n
}

func (p *Plan) EstOutputFiles() (n int) {
	for _, g := range p.Groups {
		n += g.EstOutput
	}
	return n
}

// Sizes resolves the target, min and max file sizes for a table: the config
// wins, then write.target-file-size-bytes, then DefaultTargetFileSize.
func Sizes(cfg Config, props iceberg.Properties) (target, minSize, maxSize int64, source string) {
	prop := int64(0)
	if v, ok := props[table.WriteTargetFileSizeBytesKey]; ok {
		// A property the config would refuse as target_file_size is
		// ignored here too (the config package warns about it).
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= MinTargetFileSize {
			prop = n
		}
	}
	switch {
	case cfg.TargetFileSize > 0 && cfg.TargetFileSize != prop:
		target, source = cfg.TargetFileSize, "config"
	case prop > 0:
		// The config package may already have filled the target in from
		// the property; either way the table property is the source.
		target, source = prop, "table property"
	default:
		target, source = DefaultTargetFileSize, "default"
	}
	minSize, maxSize = cfg.MinFileSize, cfg.MaxFileSize
	if minSize <= 0 {
		minSize = target * 3 / 4
	}
	if maxSize <= 0 {
		maxSize = target * 9 / 5
	}
	// A min or max given explicitly may contradict a target that came from
	// a table property; keep the range ordered around the target.
	minSize = min(minSize, target)
	maxSize = max(maxSize, target)
	return target, minSize, maxSize, source
}

// PlanTable reads the table's current snapshot and decides which data files
// to rewrite. It writes nothing. now is injected for the recently-written
// check.
func PlanTable(ctx context.Context, tbl *table.Table, cfg Config, now time.Time) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid compaction config: %w", err)
	}
	meta := tbl.Metadata()
	p := &Plan{FormatVersion: meta.Version()}
	p.TargetFileSize, p.MinFileSize, p.MaxFileSize, p.TargetSource = Sizes(cfg, tbl.Properties())
	sort, err := planSort(meta, cfg)
	if err != nil {
		return nil, fmt.Errorf("compaction sort order: %w", err)
	}
	p.sort = sort

	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return p, nil
	}
	p.SnapshotID, p.SequenceNumber = snap.SnapshotID, snap.SequenceNumber

	filter, err := whereFilter(tbl, cfg)
	if err != nil {
		return nil, err
	}
	var recent map[string]bool
	if cfg.SkipPartitionsWrittenWithin > 0 {
		recent, err = recentlyWrittenPartitions(ctx, tbl, snap, now.Add(-cfg.SkipPartitionsWrittenWithin))
		if err != nil {
			return nil, err
		}
	}
	sizes := p.fileSizes()
	dels := &deleteSets{}
	buckets, err := p.scanPartitions(ctx, tbl, snap, filter, dels, planKeeps(cfg, sizes, p.sort.wholePartition(cfg.Strategy), recent))
	if err != nil {
		return nil, err
	}

	ratio := outputRatio(meta, snap)
	for bi, b := range buckets {
		buckets[bi] = nil // its files go once its groups hold theirs
		key := b.key
		if recent[key] {
			b.Skipped = ReasonRecentlyWrite
			p.Partitions = append(p.Partitions, b.PartitionDecision)
			continue
		}
		cands, bytes, reason, skip := selectPartition(cfg, sizes, b.files.all())
		if skip != "" {
			b.Skipped = skip
			p.Partitions = append(p.Partitions, b.PartitionDecision)
			continue
		}
		if p.sort.wholePartition(cfg.Strategy) {
			// As Spark's sort strategy: every file of the partition, so
			// that it ends sorted rather than its small files only.
			cands, bytes = cands[:0], 0
			i := 0
			for t := range b.files.all() {
				cands = append(cands, candidate{index: i, size: t.File.FileSizeBytes()})
				bytes += t.File.FileSizeBytes()
				i++
			}
		}
		parts := splitPartition(cands, candidate.bytes, p.TargetFileSize, cfg)
		groupOf := make([]int32, b.files.len())
		for i := range groupOf {
			groupOf[i] = -1
		}
		groups := make([]Group, len(parts))
		deletes := make([]map[string]bool, len(parts))
		for gi, part := range parts {
			for _, c := range part {
				groupOf[c.index] = int32(gi)
			}
			groups[gi] = Group{Partition: b.Partition, SpecID: b.SpecID, key: key, Files: len(part),
				Reason: groupReason(reason, gi, len(parts)), files: newFileList(b.files.spec, b.files.partition, dels)}
			deletes[gi] = map[string]bool{}
		}
		i := 0
		for t := range b.files.all() {
			if gi := groupOf[i]; gi >= 0 {
				grp := &groups[gi]
				grp.files.add(t)
				grp.Bytes += t.File.FileSizeBytes()
				grp.Records += t.File.Count()
				for _, d := range taskDeletes(t) {
					deletes[gi][d.FilePath()] = true
				}
			}
			i++
		}
		for gi := range groups {
			grp := &groups[gi]
			grp.files.seal()
			grp.DeleteFiles = len(deletes[gi])
			grp.rowBytes = ratio * float64(grp.Bytes) / float64(max(grp.Records, 1))
			grp.EstOutput = int(sizes.files(int64(ratio * float64(grp.Bytes))))
			p.Groups = append(p.Groups, *grp)
			b.Groups++
		}
		p.Partitions = append(p.Partitions, b.PartitionDecision)
	}

	// Most files first: the biggest reduction in file count per byte read.
	slices.SortStableFunc(p.Groups, func(a, b Group) int { return cmp.Compare(b.Files, a.Files) })
	p.applyBudget(cfg)
	lists := make([]*fileList, len(p.Groups))
	for i, g := range p.Groups {
		lists[i] = g.files
	}
	dels.trim(lists)

	if cfg.RemoveDeadDeletes && len(p.Groups) > 0 {
		if p.DeadDeletes, err = deadDeletes(ctx, tbl, snap, p.rewrittenPaths); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// whereFilter is cfg.Where parsed and checked against the table's schema;
// nil when unset.
func whereFilter(tbl *table.Table, cfg Config) (iceberg.BooleanExpression, error) {
	if cfg.Where == "" {
		return nil, nil
	}
	expr, err := rowfilter.Parse(cfg.Where)
	if err != nil {
		return nil, err
	}
	if _, err := iceberg.BindExpr(tbl.Schema(), expr, true); err != nil {
		return nil, fmt.Errorf("where %q does not fit the table schema: %w", cfg.Where, err)
	}
	return expr, nil
}

// bucket is what planning keeps of one partition: its decision, and the
// files it may rewrite, packed.
type bucket struct {
	PartitionDecision
	files *fileList
}

// scanPartitions lists the live data files of snap by partition, in the
// order their partitions are first seen, counting every file (in the
// partitions' decisions and the plan's totals) and keeping those keep
// takes: what the plan holds while it decides is its candidates, not the
// table.
func (p *Plan) scanPartitions(ctx context.Context, tbl *table.Table, snap *table.Snapshot, filter iceberg.BooleanExpression,
	dels *deleteSets, keep func(key string, t table.FileScanTask) bool) ([]*bucket, error) {
	meta := tbl.Metadata()
	byKey := map[string]*bucket{}
	var out []*bucket
	deleteSeen := map[string]bool{}
	err := scanTasks(ctx, tbl, snap, filter, func(t table.FileScanTask) {
		key := partitionKey(t.File.SpecID(), t.File.Partition())
		b := byKey[key]
		if b == nil {
			b = &bucket{PartitionDecision: PartitionDecision{
				Partition: partitionName(meta, t.File.SpecID(), t.File.Partition()),
				SpecID:    int(t.File.SpecID()),
				key:       key,
			}, files: newFileList(t.File.SpecID(), maps.Clone(t.File.Partition()), dels)}
			byKey[key] = b
			out = append(out, b)
		}
		b.Files++
		b.Bytes += t.File.FileSizeBytes()
		if keep(key, t) {
			b.files.add(t)
		}
		p.DataFiles++
		p.DataBytes += t.File.FileSizeBytes()
		for _, d := range taskDeletes(t) {
			if !deleteSeen[d.FilePath()] {
				deleteSeen[d.FilePath()] = true
				p.DeleteFiles++
			}
		}
	})
	return out, err
}

// planKeeps is which files planning keeps of a partition: none of a
// partition written too recently, every file when a chosen partition is
// rewritten whole (a sort), and otherwise those selectPartition may choose.
func planKeeps(cfg Config, sizes fileSizes, whole bool, recent map[string]bool) func(key string, t table.FileScanTask) bool {
	return func(key string, t table.FileScanTask) bool {
		return !recent[key] && (whole || sizeCandidate(cfg, sizes, t.File.FileSizeBytes()) || deleteLaden(cfg, t))
	}
}

// InScope returns whether a data file of the table's current snapshot, by
// its path, is one compaction may rewrite under cfg.Where: the files the
// plan's scan lists (nil without a where: every file is). Health counts
// what compaction would merge with it, so files a where keeps out of
// compaction for good are not reported as work left.
func InScope(ctx context.Context, tbl *table.Table, cfg Config) (func(path string) bool, error) {
	filter, err := whereFilter(tbl, cfg)
	snap := tbl.CurrentSnapshot()
	if err != nil || filter == nil || snap == nil {
		return nil, err
	}
	in := map[string]struct{}{}
	if err := scanTasks(ctx, tbl, snap, filter, func(t table.FileScanTask) { in[t.File.FilePath()] = struct{}{} }); err != nil {
		return nil, err
	}
	return func(path string) bool { _, ok := in[path]; return ok }, nil
}

// selectPartition picks the candidates among the files of one partition,
// in their order, and decides whether they are rewritten, with the reason
// either way (partitionRule).
func selectPartition(cfg Config, sizes fileSizes, files iter.Seq[table.FileScanTask]) (cands []candidate, bytes int64, reason, skipped string) {
	var laden, oversized int
	i := -1
	for t := range files {
		i++
		sz := t.File.FileSizeBytes()
		l := deleteLaden(cfg, t)
		if !l && !sizeCandidate(cfg, sizes, sz) {
			continue
		}
		cands = append(cands, candidate{index: i, size: sz})
		bytes += sz
		if l {
			laden++
		} else if sz > sizes.max {
			oversized++
		}
	}
	reason, skipped = partitionRule(cfg, sizes, len(cands), laden, oversized, bytes)
	return cands, bytes, reason, skipped
}

// Candidates is what a partition holds of compaction's candidates when
// only file sizes are known (health measures the table from its manifests,
// without the delete files of each data file): Files candidates holding
// Bytes, Oversized of them over max_file_size.
type Candidates struct {
	Files, Oversized int
	Bytes            int64
}

// Add counts a data file of size bytes when it is a candidate by size:
// every file with rewrite_all, else one under minSize or over maxSize (the
// sizes of [Sizes]).
func (c *Candidates) Add(cfg Config, minSize, maxSize, size int64) {
	if !sizeCandidate(cfg, fileSizes{min: minSize, max: maxSize}, size) {
		return
	}
	c.Files++
	c.Bytes += size
	if size > maxSize {
		c.Oversized++
	}
}

// sizeCandidate reports whether a data file of size bytes is a candidate by
// its size: every file with rewrite_all, else one outside [min, max].
func sizeCandidate(cfg Config, s fileSizes, size int64) bool {
	return cfg.RewriteAll || size < s.min || size > s.max
}

// Rewritten reports whether the planner rewrites a partition holding these
// candidates (delete-laden files aside): the rules of [PlanTable], so that
// health counts as left to compact exactly the partitions a plan takes.
// target, minSize and maxSize are those of [Sizes].
func (c Candidates) Rewritten(cfg Config, target, minSize, maxSize int64) bool {
	reason, _ := partitionRule(cfg, fileSizes{target: target, min: minSize, max: maxSize}, c.Files, 0, c.Oversized, c.Bytes)
	return reason != ""
}

// partitionRule decides whether the candidate files of one partition are
// rewritten, with the reason either way: n candidates holding bytes, laden
// of them delete-laden and oversized others over max_file_size. The rules
// are those of the configuration reference: min_input_files candidates,
// unless they hold more than a target's worth or one is delete-laden; an
// oversized file is split on its own. A lone small file is left: rewritten
// alone it would come out the same.
func partitionRule(cfg Config, sizes fileSizes, n, laden, oversized int, bytes int64) (reason, skipped string) {
	target := sizes.target
	if reason, skipped = sizeRule(cfg, target, n, laden, oversized, bytes); reason == "" || cfg.RewriteAll || laden > 0 || oversized > 0 {
		return reason, skipped
	}
	// Small files alone: merged, they must come out as fewer files, or the
	// next plan finds them small again and rewrites them forever. That
	// happens when max_file_size is under twice min_file_size: 2 files of
	// 117 MiB (min 120MiB, max 230MiB) fit neither 1 file nor 2 in range.
	if out := sizes.files(bytes); out >= int64(n) {
		// out >= n >= 2 files of bytes are under min_file_size (each input
		// is), and files() chose out because out-1 would be oversized.
		return "", fmt.Sprintf("%s (%d small files holding %s would be written as %d files under min_file_size %s, or %d over max_file_size %s)",
			ReasonNoProgress, n, humanMiB(bytes), out, humanMiB(sizes.min), out-1, humanMiB(sizes.max))
	}
	return reason, ""
}

func humanMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// sizeRule is the documented rule of compact: the first that holds of
// delete-laden, oversized, min_input_files candidates and more than a
// target's worth.
func sizeRule(cfg Config, target int64, n, laden, oversized int, bytes int64) (reason, skipped string) {
	switch {
	case n == 0:
		return "", ReasonOptimal
	case cfg.RewriteAll:
		return fmt.Sprintf("rewrite_all: %d file(s)", n), ""
	case laden > 0:
		return fmt.Sprintf("%d delete-laden file(s)", laden), ""
	case oversized > 0:
		return fmt.Sprintf("%d oversized file(s)", oversized), ""
	case n == 1:
		return "", ReasonSingleFile
	case n >= cfg.MinInputFiles:
		return fmt.Sprintf("%d small files", n), ""
	case bytes > target:
		return fmt.Sprintf("%d small files holding more than a target's worth", n), ""
	}
	return "", fmt.Sprintf("%s (%d candidate files, together at most the target size; min_input_files=%d)",
		ReasonTooFewFiles, n, cfg.MinInputFiles)
}

// groupReason is the reason of group i of the n a partition is split into:
// the partition's, which counts all its candidates, and which part it is.
func groupReason(reason string, i, n int) string {
	if n <= 1 {
		return reason
	}
	return fmt.Sprintf("%s, part %d of %d of the partition", reason, i+1, n)
}

// groupBytesPerTarget is how many targets' worth of input one group holds
// at least before a partition is split into several groups. The writers
// spread a group's rows evenly over its files, so each group may add one
// file to its partition's count; groups this large keep that to one at
// most with two groups, and let two groups of one partition run at once.
const groupBytesPerTarget = 4

// candidate is a file of a partition that compaction rewrites, by its
// place in the partition's list and its size.
type candidate struct {
	index int
	size  int64
}

func (c candidate) bytes() int64 { return c.size }

// splitPartition divides a partition's candidates, of size bytes each, into
// groups of about equal bytes: one group, unless the partition holds more
// than groupBytesPerTarget targets' worth, then up to max_concurrent_groups
// groups, and more only to keep each within max_file_group_size and
// max_file_group_input_files. Each group keeps the candidates' order.
func splitPartition[T any](cands []T, size func(T) int64, target int64, cfg Config) [][]T {
	var bytes int64
	for _, t := range cands {
		bytes += size(t)
	}
	maxBytes := cfg.MaxFileGroupSize
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileGroupSize
	}
	n := int(min(int64(max(cfg.MaxConcurrentGroups, 1)), max(1, bytes/(groupBytesPerTarget*target))))
	n = max(n, int((bytes+maxBytes-1)/maxBytes))
	maxFiles := len(cands)
	if cfg.MaxFileGroupInputFiles > 0 {
		maxFiles = cfg.MaxFileGroupInputFiles
		n = max(n, (len(cands)+maxFiles-1)/maxFiles)
	}
	if n <= 1 {
		return [][]T{cands}
	}
	// Largest first into the lightest group with room for the file, in
	// files and in bytes (a file larger than max_file_group_size goes
	// alone); a file no group has room for starts a group of its own, so
	// every group stays within both bounds, as documented. Each group
	// keeps its files in the order the scan listed them.
	idx := make([]int, len(cands))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(size(cands[b]), size(cands[a]))
	})
	load := make([]int64, n)
	count := make([]int, n)
	owner := make([]int, len(cands))
	for _, i := range idx {
		sz := size(cands[i])
		g := -1
		for k := range load {
			if count[k] < maxFiles && (g < 0 || load[k] < load[g]) {
				g = k
			}
		}
		// The lightest group with room in files is the one the file fits
		// best in bytes too; when it does not fit there, it fits nowhere.
		if g < 0 || (count[g] > 0 && load[g]+sz > maxBytes) {
			g = len(load)
			load, count = append(load, 0), append(count, 0)
		}
		owner[i] = g
		load[g] += sz
		count[g]++
	}
	out := make([][]T, len(load))
	for g := range out {
		out[g] = make([]T, 0, count[g])
	}
	for i, t := range cands {
		out[owner[i]] = append(out[owner[i]], t)
	}
	return slices.DeleteFunc(out, func(g []T) bool { return len(g) == 0 })
}

// outputRatio is the output bytes per input byte (row for row) of the
// table's last compaction by the maintainer on the main branch, from its
// snapshot summary: rewritten files usually compress better than the small
// ones they replace. 1 without such a compaction, or when it also dropped
// delete files (whose bytes the summary adds to the removed ones).
func outputRatio(meta table.Metadata, snap *table.Snapshot) float64 {
	for s, hops := snap, 0; s != nil && hops < 1000; s, hops = parent(meta, s), hops+1 {
		if s.Summary == nil || s.Summary.Properties[tableprops.SummaryOperation] != "compact" {
			continue
		}
		props := s.Summary.Properties
		num := func(k string) float64 {
			v, _ := strconv.ParseFloat(props[k], 64)
			return v
		}
		if num("removed-delete-files") > 0 || num("removed-position-delete-files") > 0 || num("removed-equality-delete-files") > 0 {
			return 1
		}
		added, removed := num("added-files-size"), num("removed-files-size")
		addedRows, removedRows := num("added-records"), num("deleted-records")
		if added <= 0 || removed <= 0 || addedRows <= 0 || removedRows <= 0 {
			return 1
		}
		return min(max((added/addedRows)/(removed/removedRows), 0.1), 10)
	}
	return 1
}

// deleteLaden applies iceberg-go's candidate rules for deletes: too many
// delete files, or too many rows shadowed by file-scoped deletes.
func deleteLaden(cfg Config, t table.FileScanTask) bool {
	if len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) >= cfg.DeleteFileThreshold {
		return true
	}
	if cfg.DeleteRatioThreshold <= 0 || t.File.Count() <= 0 {
		return false
	}
	var deleted int64
	for _, d := range append(slices.Clip(t.DeleteFiles), t.DeletionVectorFiles...) {
		if referencedPath(d) != "" {
			deleted += d.Count()
		}
	}
	return float64(min(deleted, t.File.Count()))/float64(t.File.Count()) >= cfg.DeleteRatioThreshold
}

func taskDeletes(t table.FileScanTask) []iceberg.DataFile {
	out := make([]iceberg.DataFile, 0, len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles))
	out = append(out, t.DeleteFiles...)
	out = append(out, t.EqualityDeleteFiles...)
	return append(out, t.DeletionVectorFiles...)
}

func (p *Plan) rewrittenPaths() map[string]struct{} {
	paths := map[string]struct{}{}
	for _, g := range p.Groups {
		for t := range g.files.all() {
			paths[t.File.FilePath()] = struct{}{}
		}
	}
	return paths
}

// filePathFieldID is the reserved field id of a position delete's file_path.
const filePathFieldID = 2147483546

// referencedPath is the single data file a position delete or deletion
// vector targets, or "" when it is partition-scoped.
func referencedPath(d iceberg.DataFile) string {
	if d.ContentType() == iceberg.EntryContentEqDeletes {
		return ""
	}
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		return *ref
	}
	lo, hi := d.LowerBoundValues()[filePathFieldID], d.UpperBoundValues()[filePathFieldID]
	if len(lo) == 0 || !bytes.Equal(lo, hi) {
		return ""
	}
	return string(lo)
}

// deadDeletes finds the delete files that apply to no live data file once
// the rewritten files are gone: position deletes of rewritten or vanished
// files, and equality deletes with no older data left in their partition.
// The rewritten paths are gathered only for a table with deletes.
func deadDeletes(ctx context.Context, tbl *table.Table, snap *table.Snapshot, rewrittenPaths func() map[string]struct{}) ([]iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	// A file-scoped position delete whose target is no longer a live data
	// file (left behind by an earlier rewrite) is dead too: count its
	// target as rewritten for the decision.
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	if !slices.ContainsFunc(manifests, func(m iceberg.ManifestFile) bool {
		return m.ManifestContent() == iceberg.ManifestContentDeletes
	}) {
		// No delete manifest, no delete file: none can be dead. Spares a
		// second read of every data manifest on append-only tables.
		return nil, nil
	}
	rewritten := rewrittenPaths()
	live := map[string]bool{}
	var targets []string
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			df := e.DataFile()
			switch df.ContentType() {
			case iceberg.EntryContentData:
				live[df.FilePath()] = true
			case iceberg.EntryContentPosDeletes:
				if ref := referencedPath(df); ref != "" {
					targets = append(targets, ref)
				}
			}
		}
	}
	extended := make(map[string]struct{}, len(rewritten))
	for k := range rewritten {
		extended[k] = struct{}{}
	}
	for _, t := range targets {
		if !live[t] {
			extended[t] = struct{}{}
		}
	}
	pos, err := table.CollectDeadPositionDeletes(ctx, fs, snap, extended)
	if err != nil {
		return nil, fmt.Errorf("find dead position deletes: %w", err)
	}
	eq, err := icecompaction.CollectDeadEqualityDeletesWithSpecs(ctx, fs, tbl.Metadata(), snap, rewritten)
	if err != nil {
		return nil, fmt.Errorf("find dead equality deletes: %w", err)
	}
	out := append(pos, eq...)
	sort.Slice(out, func(i, j int) bool { return out[i].FilePath() < out[j].FilePath() })
	return out, nil
}

// badManifest finds the file that made iceberg-go's planning fail, whose
// error names neither the manifest list nor the manifest: it reads them
// again, strictly (a manifest of another size than its list records is an
// error), and returns the first failure, naming the file, or nil.
func badManifest(ctx context.Context, tbl *table.Table, snap *table.Snapshot) error {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil
	}
	_, err = manifestscan.ReadSnapshot(fs, snap, manifestscan.ListOptions{Fields: manifestscan.ListLength}, func(e *manifestscan.ListEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return manifestscan.ReadManifest(fs, string(e.Path), manifestscan.ManifestOptions{Length: e.Length},
			func(*manifestscan.ManifestEntry) error { return nil })
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// recentlyWrittenPartitions returns the partitions that received a data or
// delete file in a snapshot of the current lineage newer than since.
func recentlyWrittenPartitions(ctx context.Context, tbl *table.Table, snap *table.Snapshot, since time.Time) (map[string]bool, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	out := map[string]bool{}
	meta := tbl.Metadata()
	for s := snap; s != nil && s.TimestampMs >= since.UnixMilli(); {
		manifests, err := s.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("read manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range manifests {
			if m.SnapshotID() != s.SnapshotID {
				continue // written by an older snapshot: holds no file added by s
			}
			for e, err := range m.Entries(fs, true) {
				if err != nil {
					return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
				}
				if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == s.SnapshotID {
					df := e.DataFile()
					out[partitionKey(df.SpecID(), df.Partition())] = true
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return out, nil
}

// partitionKey identifies a (spec, partition) pair; it is the partition's
// display name prefixed by the spec id, which is unique within a spec.
func partitionKey(specID int32, part map[int]any) string {
	return strconv.Itoa(int(specID)) + "\x00" + formatPartition(nil, int(specID), part)
}

func partitionName(meta table.Metadata, specID int32, part map[int]any) string {
	return formatPartition(meta, int(specID), part)
}

// formatPartition renders partition values as name=value pairs in spec
// order; without metadata it falls back to field ids.
func formatPartition(meta table.Metadata, specID int, part map[int]any) string {
	if len(part) == 0 {
		return "(unpartitioned)"
	}
	names := map[int]string{}
	human := map[int]func(any) string{}
	var ids []int
	if meta != nil {
		if spec := meta.PartitionSpecByID(specID); spec != nil {
			schema := meta.CurrentSchema()
			for _, f := range spec.Fields() {
				names[f.FieldID] = f.Name
				ids = append(ids, f.FieldID)
				// Render values as Iceberg does in partition paths:
				// hour 438296 -> 2020-01-01-08.
				if src, ok := schema.FindFieldByID(f.SourceID()); ok {
					tr, typ := f.Transform, src.Type
					human[f.FieldID] = func(v any) string { return tr.ToHumanStrType(typ, v) }
				}
			}
		}
	}
	if len(ids) == 0 {
		for id := range part {
			ids = append(ids, id)
		}
		sort.Ints(ids)
	}
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		name := names[id]
		if name == "" {
			name = strconv.Itoa(id)
		}
		v := formatValue(part[id])
		if h := human[id]; h != nil && part[id] != nil {
			v = h(part[id])
		}
		parts = append(parts, name+"="+v)
	}
	return strings.Join(parts, "/")
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case iceberg.Date:
		return time.Unix(int64(x)*86400, 0).UTC().Format("2006-01-02")
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
