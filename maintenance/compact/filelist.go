package compact

import (
	"encoding/binary"
	"iter"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// A run holds every data file it rewrites from the plan to the commit: as
// scan tasks of slim data files that took about 0.4 KB a file (the task,
// the file, its path), 33 MB live at 80,000 files in one partition, twice
// that under the collector's heap goal: the one part of a run's memory that
// grew with the file count. A fileList packs the files of one partition
// into a single byte slice instead, with nothing for the collector to
// trace: each path front-coded against the one before it (a partition's
// files share a folder and a writer's name prefix), the numbers as
// varints, and the delete files a task applies as one id of a set interned
// for the whole plan (a partition's many data files of one sequence number
// share theirs). That is 40-80 bytes a file. Readers go through it in
// order (all), one task decoded at a time.

// fileList is the data files of one partition as scan tasks, in the order
// they were added. Its zero value is not usable: see newFileList.
type fileList struct {
	buf []byte
	n   int

	// Shared by every file: a list holds the files of one partition of
	// one spec.
	spec      int32
	partition map[int]any // never modified
	dels      *deleteSets // the plan's, shared by its lists

	formats []iceberg.FileFormat // the formats the records index
	last    []byte               // the path of the file added last
}

// newFileList returns an empty list of files of one partition, whose tasks'
// delete files dels interns (nil: a set of the list's own).
func newFileList(spec int32, partition map[int]any, dels *deleteSets) *fileList {
	if dels == nil {
		dels = &deleteSets{}
	}
	return &fileList{spec: spec, partition: partition, dels: dels}
}

// Flags of a record's optional fields.
const (
	recSortOrder = 1 << iota
	recFileFirstRowID
	recTaskFirstRowID
	recDataSequence
	recKeyMetadata
	recSplits
)

// add appends t. Its file must be of the list's partition; its residual is
// dropped (compaction reads whole files).
func (l *fileList) add(t table.FileScanTask) {
	f := t.File
	path := f.FilePath()
	common := 0
	for common < len(l.last) && common < len(path) && l.last[common] == path[common] {
		common++
	}
	b := binary.AppendUvarint(l.buf, uint64(common))
	b = binary.AppendUvarint(b, uint64(len(path)-common))
	b = append(b, path[common:]...)
	l.last = append(l.last[:0], path...)

	fi := slices.Index(l.formats, f.FileFormat())
	if fi < 0 {
		fi = len(l.formats)
		l.formats = append(l.formats, f.FileFormat())
	}
	b = binary.AppendUvarint(b, uint64(fi))
	b = binary.AppendVarint(b, f.FileSizeBytes())
	b = binary.AppendVarint(b, f.Count())
	b = binary.AppendVarint(b, t.Start)
	b = binary.AppendVarint(b, t.Length)

	so, fr := f.SortOrderID(), f.FirstRowID()
	key, splits := f.KeyMetadata(), f.SplitOffsets()
	flag := func(set bool, f byte) byte {
		if set {
			return f
		}
		return 0
	}
	b = append(b, flag(so != nil, recSortOrder)|flag(fr != nil, recFileFirstRowID)|flag(t.FirstRowID != nil, recTaskFirstRowID)|
		flag(t.DataSequenceNumber != nil, recDataSequence)|flag(key != nil, recKeyMetadata)|flag(splits != nil, recSplits))
	if so != nil {
		b = binary.AppendVarint(b, int64(*so))
	}
	if fr != nil {
		b = binary.AppendVarint(b, *fr)
	}
	if t.FirstRowID != nil {
		b = binary.AppendVarint(b, *t.FirstRowID)
	}
	if t.DataSequenceNumber != nil {
		b = binary.AppendVarint(b, *t.DataSequenceNumber)
	}
	if key != nil {
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
	}
	if splits != nil {
		b = binary.AppendUvarint(b, uint64(len(splits)))
		for _, s := range splits {
			b = binary.AppendVarint(b, s)
		}
	}
	b = binary.AppendUvarint(b, uint64(l.dels.id(t)))
	l.buf = b
	l.n++
}

// seal trims the list to its size once it is complete.
func (l *fileList) seal() {
	l.buf = slices.Clip(append([]byte(nil), l.buf...))
	l.last = nil
}

// len is the number of files.
func (l *fileList) len() int { return l.n }

// all yields the files' tasks in order. Each task is decoded anew: a
// caller that keeps tasks holds what it keeps, not the list.
func (l *fileList) all() iter.Seq[table.FileScanTask] {
	return func(yield func(table.FileScanTask) bool) {
		r := listReader{l: l}
		for range l.n {
			if !yield(r.next()) {
				return
			}
		}
	}
}

// listReader decodes a list's records in turn. The list is this package's
// own encoding of values it was given, so a malformed record is a bug: it
// panics.
type listReader struct {
	l    *fileList
	off  int
	path []byte
	set  int // the delete set id of the task read last
}

func (r *listReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.l.buf[r.off:])
	if n <= 0 {
		panic("compact: malformed file list")
	}
	r.off += n
	return v
}

// varint undoes binary.AppendVarint's zig-zag encoding.
func (r *listReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *listReader) bytes(n int) []byte {
	b := r.l.buf[r.off : r.off+n]
	r.off += n
	return b
}

func (r *listReader) next() table.FileScanTask {
	common := int(r.uvarint())
	suffix := r.bytes(int(r.uvarint()))
	r.path = append(r.path[:common], suffix...)
	f := &slimFile{path: string(r.path), partition: r.l.partition, specID: r.l.spec}
	f.format = r.l.formats[r.uvarint()]
	f.size, f.count = r.varint(), r.varint()
	t := table.FileScanTask{File: f, Start: r.varint(), Length: r.varint()}
	flags := r.bytes(1)[0]
	if flags&recSortOrder != 0 {
		v := int(r.varint())
		f.sortOrder = &v
	}
	if flags&recFileFirstRowID != 0 {
		v := r.varint()
		f.firstRowID = &v
	}
	if flags&recTaskFirstRowID != 0 {
		v := r.varint()
		t.FirstRowID = &v
	}
	if flags&recDataSequence != 0 {
		v := r.varint()
		t.DataSequenceNumber = &v
	}
	if flags&recKeyMetadata != 0 {
		f.key = slices.Clone(r.bytes(int(r.uvarint())))
	}
	if flags&recSplits != 0 {
		f.splits = make([]int64, r.uvarint())
		for i := range f.splits {
			f.splits[i] = r.varint()
		}
	}
	if r.set = int(r.uvarint()); r.set > 0 {
		s := r.l.dels.sets[r.set-1]
		t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles = s.pos, s.eq, s.dv
	}
	return t
}

// deleteSets interns the delete files of a plan's tasks, and the sets of
// them each task applies. The sets' slices are shared by every task that
// applies them: readers must not modify them. Once the plan is made, trim
// keeps only the sets its groups use.
type deleteSets struct {
	index map[string]int // deleteKey -> its number
	files []iceberg.DataFile
	ids   map[string]int // a set's key -> its id (1-based)
	sets  []deleteSet
	key   []byte // scratch: the key of the set being looked up
}

type deleteSet struct{ pos, eq, dv []iceberg.DataFile }

// id is the id of the set of delete files t applies, 0 for none.
func (s *deleteSets) id(t table.FileScanTask) int {
	if len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) == 0 {
		return 0
	}
	if s.index == nil {
		s.index, s.ids = map[string]int{}, map[string]int{}
	}
	// The key: each list's length and its files' numbers, as varints.
	key := s.key[:0]
	for _, list := range [][]iceberg.DataFile{t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles} {
		key = binary.AppendUvarint(key, uint64(len(list)))
		for _, d := range list {
			k := deleteKey(d)
			n, ok := s.index[k]
			if !ok {
				n = len(s.files)
				s.index[k] = n
				s.files = append(s.files, d)
			}
			key = binary.AppendUvarint(key, uint64(n))
		}
	}
	s.key = key
	if id, ok := s.ids[string(key)]; ok {
		return id
	}
	set := deleteSet{pos: s.interned(t.DeleteFiles), eq: s.interned(t.EqualityDeleteFiles), dv: s.interned(t.DeletionVectorFiles)}
	s.sets = append(s.sets, set)
	s.ids[string(key)] = len(s.sets)
	return len(s.sets)
}

// trim drops what only planning needed, and every set but those the lists
// use: the scan saw the delete files of every partition, and a plan keeps
// only its groups' (iceberg-go's planner hands them out with statistics).
func (s *deleteSets) trim(lists []*fileList) {
	used := make([]bool, len(s.sets)+1)
	for _, l := range lists {
		r := listReader{l: l}
		for range l.n {
			r.next()
			used[r.set] = true
		}
	}
	for i := range s.sets {
		if !used[i+1] {
			s.sets[i] = deleteSet{}
		}
	}
	s.index, s.files, s.ids, s.key = nil, nil, nil, nil
}

// interned is list with each delete file as first seen (one object per
// file, whichever task listed it), nil when empty.
func (s *deleteSets) interned(list []iceberg.DataFile) []iceberg.DataFile {
	if len(list) == 0 {
		return nil
	}
	out := make([]iceberg.DataFile, len(list))
	for i, d := range list {
		out[i] = s.files[s.index[deleteKey(d)]]
	}
	return out
}

// deleteKey identifies a delete file: its path, and for a deletion vector
// its place in the Puffin file, which holds the vectors of many data files.
func deleteKey(d iceberg.DataFile) string {
	if off := d.ContentOffset(); off != nil {
		return d.FilePath() + "\x00" + strconv.FormatInt(*off, 10)
	}
	return d.FilePath()
}
