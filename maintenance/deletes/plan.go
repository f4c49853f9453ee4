package deletes

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Plan is what one run does to one table. It is a value: the plan that
// `plan` and `--dry-run` show is the plan that Execute runs, on the
// snapshot it was made from.
type Plan struct {
	SnapshotID     int64
	SequenceNumber int64
	FormatVersion  int

	TargetFileSize int64
	TargetSource   string // "config", "table property" or "default"

	// Groups are merged, each into one position-delete file.
	Groups []Group
	// Dangling are delete files that apply to no live data file: dropped.
	Dangling []Dropped
	// Skipped says, for partitions with position deletes that are not
	// merged, why.
	Skipped []Skip

	// Live delete files of the snapshot, by kind.
	PositionDeleteFiles int
	DeletionVectors     int
	EqualityDeleteFiles int

	// live maps each live data file to its data sequence number; spelled
	// maps the path part of its location (no scheme, no authority) to it.
	live    map[string]int64
	spelled map[string]string
}

// Group is a set of position-delete files of one partition merged into one.
type Group struct {
	Partition string `json:"partition"`
	SpecID    int    `json:"spec_id"`
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
	Records   int64  `json:"records"` // positions in the sources, before dangling ones are left out
	Reason    string `json:"reason"`

	sources []source
}

// Dropped is a delete file that is removed without replacement.
type Dropped struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"` // "position delete" or "deletion vector"
	Records int64  `json:"records"`
	Reason  string `json:"reason"`

	file iceberg.DataFile
}

// Skip is a partition whose position deletes are left as they are.
type Skip struct {
	Partition string `json:"partition"`
	Files     int    `json:"files"`
	Reason    string `json:"reason"`
}

// source is a live position-delete file with its data sequence number.
type source struct {
	file iceberg.DataFile
	seq  int64
}

// Reasons, stable strings that tests and users can rely on.
const (
	ReasonDisabled      = "delete-file upkeep disabled"
	ReasonNoSnapshot    = "table has no snapshot"
	ReasonFormatV1      = "format v1: the table has no delete files"
	ReasonNothingToDo   = "no dangling or small position-delete files"
	ReasonTooFewFiles   = "fewer small position-delete files than min_input_files"
	ReasonFormatV3      = "format v3: new position deletes must be deletion vectors, which this task does not write"
	ReasonNotParquet    = "position-delete files not in Parquet"
	kindPositionDelete  = "position delete"
	kindDeletionVector  = "deletion vector"
	filePathFieldID     = 2147483546
	posFieldID          = 2147483545
	unpartitionedString = "(unpartitioned)"
)

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Groups) == 0 && len(p.Dangling) == 0 }

// IdleReason says why an empty plan changes nothing: no snapshot, a v1
// table, or no dangling file and no partition with enough small ones (then
// how many small files are left and why, as the plan's skips list them).
func (p *Plan) IdleReason() string {
	switch {
	case p.FormatVersion < 2:
		return ReasonFormatV1
	case p.SnapshotID == 0:
		return ReasonNoSnapshot
	case len(p.Skipped) == 0:
		return ReasonNothingToDo
	}
	files, why := 0, map[string]bool{}
	for _, s := range p.Skipped {
		files += s.Files
		r, _, _ := strings.Cut(s.Reason, " (")
		why[r] = true
	}
	return fmt.Sprintf("no dangling delete files; %d position-delete file(s) in %d partition(s) left as they are: %s",
		files, len(p.Skipped), strings.Join(slices.Sorted(maps.Keys(why)), "; "))
}

// InputFiles counts the delete files the plan removes; InputBytes their bytes.
func (p *Plan) InputFiles() int {
	n := len(p.Dangling)
	for _, g := range p.Groups {
		n += g.Files
	}
	return n
}

func (p *Plan) InputBytes() (n int64) {
	for _, d := range p.Dangling {
		n += d.file.FileSizeBytes()
	}
	for _, g := range p.Groups {
		n += g.Bytes
	}
	return n
}

// TargetSize resolves the merged files' size: the config, then the table's
// write.delete.target-file-size-bytes, then DefaultTargetFileSize.
func TargetSize(cfg Config, props iceberg.Properties) (int64, string) {
	if cfg.TargetFileSize > 0 {
		return cfg.TargetFileSize, "config"
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(props[PropTargetFileSize]), 10, 64); err == nil && n >= 1<<20 {
		return n, "table property"
	}
	return DefaultTargetFileSize, "default"
}

// PlanTable reads the current snapshot's manifests and decides which delete
// files to drop and which to merge. It writes nothing.
func PlanTable(ctx context.Context, tbl *table.Table, cfg Config) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid deletes config: %w", err)
	}
	meta := tbl.Metadata()
	p := &Plan{FormatVersion: meta.Version(), live: map[string]int64{}, spelled: map[string]string{}}
	p.TargetFileSize, p.TargetSource = TargetSize(cfg, tbl.Properties())
	snap := tbl.CurrentSnapshot()
	if snap == nil || meta.Version() < 2 { // v1 tables have no delete files
		return p, nil
	}
	p.SnapshotID, p.SequenceNumber = snap.SnapshotID, snap.SequenceNumber
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	var posDeletes []source
	var dvs []iceberg.DataFile
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			df := e.DataFile()
			switch {
			case df.ContentType() == iceberg.EntryContentData:
				p.live[df.FilePath()] = e.SequenceNum()
				p.spelled[locationPath(df.FilePath())] = df.FilePath()
			case df.ContentType() == iceberg.EntryContentEqDeletes:
				p.EqualityDeleteFiles++
			case table.IsDeletionVector(df):
				p.DeletionVectors++
				dvs = append(dvs, df)
			default:
				p.PositionDeleteFiles++
				posDeletes = append(posDeletes, source{file: df, seq: e.SequenceNum()})
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}

	for _, dv := range dvs {
		if ref := dv.ReferencedDataFile(); ref != nil {
			if !p.named(*ref) {
				p.Dangling = append(p.Dangling, Dropped{Path: dv.FilePath(), Kind: kindDeletionVector, Records: dv.Count(),
					Reason: "its data file " + *ref + " is not live", file: dv})
			}
		}
	}
	livePaths := make([]string, 0, len(p.live))
	for path := range p.live {
		livePaths = append(livePaths, path)
	}
	sort.Strings(livePaths)

	type bucket struct {
		name  string
		spec  int
		cands []source
		notPq int // files not in Parquet, which stay
	}
	buckets := map[string]*bucket{}
	var order []string
	small := p.TargetFileSize * 3 / 4
	for _, s := range posDeletes {
		why, dead, err := confirmDangling(ctx, fs, s.file, livePaths, p)
		if err != nil {
			return nil, err
		}
		if dead {
			p.Dangling = append(p.Dangling, Dropped{Path: s.file.FilePath(), Kind: kindPositionDelete, Records: s.file.Count(),
				Reason: why, file: s.file})
			continue
		}
		key := partitionKey(s.file)
		b := buckets[key]
		if b == nil {
			b = &bucket{name: partitionName(meta, s.file), spec: int(s.file.SpecID())}
			buckets[key] = b
			order = append(order, key)
		}
		switch {
		case s.file.FileFormat() != iceberg.ParquetFile:
			b.notPq++
		case s.file.FileSizeBytes() < small:
			b.cands = append(b.cands, s)
		}
	}
	for _, key := range order {
		b := buckets[key]
		skip := func(n int, why string) { p.Skipped = append(p.Skipped, Skip{Partition: b.name, Files: n, Reason: why}) }
		if b.notPq > 0 {
			skip(b.notPq, ReasonNotParquet)
		}
		switch {
		case len(b.cands) == 0:
			continue
		case p.FormatVersion >= 3:
			skip(len(b.cands), ReasonFormatV3)
			continue
		case len(b.cands) < cfg.MinInputFiles:
			skip(len(b.cands), fmt.Sprintf("%s (%d, min_input_files=%d)", ReasonTooFewFiles, len(b.cands), cfg.MinInputFiles))
			continue
		}
		for _, bin := range binPack(b.cands, p.TargetFileSize) {
			if len(bin) < 2 {
				continue // merged alone it would come out the same
			}
			g := Group{Partition: b.name, SpecID: b.spec, Files: len(bin), sources: bin,
				Reason: fmt.Sprintf("%d small position-delete files", len(bin))}
			for _, s := range bin {
				g.Bytes += s.file.FileSizeBytes()
				g.Records += s.file.Count()
			}
			p.Groups = append(p.Groups, g)
		}
	}
	slices.SortStableFunc(p.Dangling, func(a, b Dropped) int { return cmp.Compare(a.Path, b.Path) })
	return p, nil
}

// dangling reports whether the position-delete file d names no live data
// file, from its metadata alone: its referenced_data_file, or the bounds of
// its file_path column, which enclose every path it names (bounds that
// writers truncate still enclose them). Without either it is not known to
// be dangling; a merge still leaves out its rows of files not live.
func dangling(d iceberg.DataFile, livePaths []string) (string, bool) {
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		if _, ok := slices.BinarySearch(livePaths, *ref); !ok {
			return "its data file " + *ref + " is not live", true
		}
		return "", false
	}
	lo, okLo := d.LowerBoundValues()[filePathFieldID]
	hi, okHi := d.UpperBoundValues()[filePathFieldID]
	if !okLo || !okHi || len(hi) == 0 {
		return "", false
	}
	i, _ := slices.BinarySearch(livePaths, string(lo))
	if i < len(livePaths) && livePaths[i] <= string(hi) {
		return "", false
	}
	if string(lo) == string(hi) {
		return "its data file " + string(lo) + " is not live", true
	}
	return fmt.Sprintf("no live data file between its bounds %s and %s", lo, hi), true
}

// confirmDangling is dangling, confirmed by reading the file when its
// metadata is all that says so: a writer's truncated or wrong bounds must
// never drop a delete that still applies. A file that cannot be read
// fails the plan: nothing is dropped on doubt.
func confirmDangling(ctx context.Context, fs iceio.IO, d iceberg.DataFile, livePaths []string, p *Plan) (string, bool, error) {
	why, dead := dangling(d, livePaths)
	if !dead {
		return "", false, nil
	}
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		// Exact (the spec's own field), but for another spelling of a
		// live file's location, which a reader may take as that file.
		return why, !p.named(*ref), nil
	}
	if d.FileFormat() != iceberg.ParquetFile {
		return "", false, nil
	}
	ps, err := readPositions(ctx, fs, d)
	if err != nil {
		return "", false, fmt.Errorf("confirm that a position-delete file is dangling: %w", err)
	}
	for _, pos := range ps {
		if p.named(pos.path) {
			return "", false, nil
		}
	}
	return why, true, nil
}

// named reports whether path names a live data file: exactly, or under
// another spelling of its location (s3a:// for s3://, another authority),
// which a reader may take as that file, so that a delete naming it is
// never dropped.
func (p *Plan) named(path string) bool {
	_, exact := p.live[path]
	_, other := p.spelled[locationPath(path)]
	return exact || other
}

// locationPath is a location without its scheme and authority:
// s3a://bucket/t/a.parquet, s3://other/t/a.parquet and /t/a.parquet are all
// /t/a.parquet.
func locationPath(loc string) string {
	i := strings.Index(loc, ":")
	if i <= 0 || strings.ContainsAny(loc[:i], "/") {
		return loc
	}
	rest := loc[i+1:]
	if !strings.HasPrefix(rest, "//") {
		return rest
	}
	if j := strings.IndexByte(rest[2:], '/'); j >= 0 {
		return rest[2+j:]
	}
	return ""
}

// binPack splits candidates into bins of at most target bytes each, largest
// first into the first bin with room.
func binPack(cands []source, target int64) [][]source {
	sorted := slices.Clone(cands)
	slices.SortStableFunc(sorted, func(a, b source) int { return cmp.Compare(b.file.FileSizeBytes(), a.file.FileSizeBytes()) })
	var bins [][]source
	var loads []int64
	for _, s := range sorted {
		sz := s.file.FileSizeBytes()
		i := slices.IndexFunc(loads, func(l int64) bool { return l+sz <= target })
		if i < 0 {
			bins, loads = append(bins, nil), append(loads, 0)
			i = len(bins) - 1
		}
		bins[i], loads[i] = append(bins[i], s), loads[i]+sz
	}
	return bins
}

// partitionKey identifies a (spec, partition) pair: position deletes apply
// within their partition, so only files of one pair are merged.
func partitionKey(d iceberg.DataFile) string {
	part := d.Partition()
	ids := make([]int, 0, len(part))
	for id := range part {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(d.SpecID())))
	for _, id := range ids {
		fmt.Fprintf(&b, "\x00%d=%T:%v", id, part[id], part[id])
	}
	return b.String()
}

type partRecord []any

func (r partRecord) Size() int        { return len(r) }
func (r partRecord) Get(i int) any    { return r[i] }
func (r partRecord) Set(i int, v any) { r[i] = v }

// partitionName renders d's partition as Iceberg names it in paths.
func partitionName(meta table.Metadata, d iceberg.DataFile) string {
	spec := meta.PartitionSpecByID(int(d.SpecID()))
	if spec == nil || spec.IsUnpartitioned() {
		return unpartitionedString
	}
	var rec partRecord
	for _, f := range spec.Fields() {
		rec = append(rec, d.Partition()[f.FieldID])
	}
	return spec.PartitionToPath(rec, meta.CurrentSchema())
}
