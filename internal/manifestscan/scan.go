// Package manifestscan is the one reader of Iceberg manifest lists and
// manifests: a streaming Avro object-container decoder (codecs null,
// deflate, snappy, zstandard) that decodes only the fields its caller asks
// for and skips every other one in place.
//
// Each file is read strictly: a bad magic, an unknown codec, a sync
// marker mismatch, bytes left in a block, a value that runs past its block
// or a missing required field is an error, never a shorter result. Every
// error is an *Error naming the file and wrapping a sentinel (ErrMissing,
// ErrBadMagic, ErrTruncated, ErrUnknownCodec, ErrMissingField, ErrBadSchema,
// ErrCorrupt), so what to tolerate is the caller's choice: expiry, for
// example, passes over a missing file of an expiring snapshot, orphan
// removal tolerates nothing. The tests check it field by field against
// iceberg-go's decoding on every fixture and generated table.
package manifestscan

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	iceio "github.com/apache/iceberg-go/io"
)

// Opener opens a file by its location; iceberg-go's table IO is one.
type Opener interface {
	Open(path string) (iceio.File, error)
}

// ListField selects manifest-list fields beyond manifest_path, which is
// always read.
type ListField uint32

const (
	ListLength            ListField = 1 << iota // manifest_length
	ListSpecID                                  // partition_spec_id
	ListContent                                 // content
	ListSequenceNumber                          // sequence_number
	ListMinSequenceNumber                       // min_sequence_number
	ListAddedSnapshotID                         // added_snapshot_id
	ListFileCounts                              // added/existing/deleted_files_count (v1: *_data_files_count)
	ListRowCounts                               // added/existing/deleted_rows_count

	ListAll = ListLength | ListSpecID | ListContent | ListSequenceNumber | ListMinSequenceNumber |
		ListAddedSnapshotID | ListFileCounts | ListRowCounts
)

// ListOptions says what to read from a manifest list.
type ListOptions struct {
	Fields ListField
	// Required fields must be in the writer schema (ErrMissingField
	// otherwise); absent optional ones read as their defaults.
	Required ListField
}

// ListEntry is one manifest-list entry. The callback gets it to read only:
// the next entry reuses it and the buffer Path points into, so copy what
// you keep. Fields not asked for, absent from
// the schema, or null read as 0, except AddedSnapshotID and the counts,
// which read as -1 (as iceberg-go reads a v1 list without them).
type ListEntry struct {
	Path              []byte
	Length            int64
	SpecID            int32
	Content           int32 // 0 data, 1 deletes
	SequenceNumber    int64
	MinSequenceNumber int64
	AddedSnapshotID   int64
	AddedFiles        int32
	ExistingFiles     int32
	DeletedFiles      int32
	AddedRows         int64
	ExistingRows      int64
	DeletedRows       int64
}

// ManifestField selects manifest-entry fields beyond status and
// data_file.file_path, which are always read.
type ManifestField uint32

const (
	ManifestSnapshotID         ManifestField = 1 << iota // snapshot_id
	ManifestSequenceNumbers                              // sequence_number, file_sequence_number
	ManifestContent                                      // data_file.content
	ManifestFileSize                                     // data_file.file_size_in_bytes
	ManifestRecordCount                                  // data_file.record_count
	ManifestReferencedDataFile                           // data_file.referenced_data_file
	ManifestContentSize                                  // data_file.content_size_in_bytes (a deletion vector's blob)

	ManifestAll = ManifestSnapshotID | ManifestSequenceNumbers | ManifestContent | ManifestFileSize |
		ManifestRecordCount | ManifestReferencedDataFile | ManifestContentSize
)

// ManifestOptions says what to read from a manifest.
type ManifestOptions struct {
	Fields ManifestField
	// Length, when positive, is the manifest_length its manifest list
	// records: a file of any other length is an error (a manifest cut at a
	// block boundary would otherwise read as a shorter, valid one).
	Length int64
}

// Manifest entry statuses (Iceberg spec).
const (
	StatusExisting = 0
	StatusAdded    = 1
	StatusDeleted  = 2
)

// ManifestEntry is one manifest entry, as written: snapshot and sequence
// numbers that a writer left null (to be inherited from the manifest) have
// their Has flag false. Byte slices point into a buffer that the next
// entry reuses; ReferencedDataFile is nil when absent, null or empty.
type ManifestEntry struct {
	Status                int32
	SnapshotID            int64
	HasSnapshotID         bool
	SequenceNumber        int64
	HasSequenceNumber     bool
	FileSequenceNumber    int64
	HasFileSequenceNumber bool
	Content               int32 // 0 data, 1 position deletes, 2 equality deletes
	FilePath              []byte
	FileSizeInBytes       int64
	RecordCount           int64
	ReferencedDataFile    []byte
	ContentSizeInBytes    int64
	HasContentSizeInBytes bool
}

// Capture slots of a manifest-list entry.
const (
	lsLength = iota
	lsSpecID
	lsContent
	lsSeq
	lsMinSeq
	lsAddedSnapshot
	lsAddedFiles
	lsExistingFiles
	lsDeletedFiles
	lsAddedRows
	lsExistingRows
	lsDeletedRows
)

// Capture slots of a manifest entry.
const (
	msStatus = iota
	msSnapshot
	msSeq
	msFileSeq
	msContent
	msSize
	msRecords
	msContentSize
)

const (
	strPath = 0 // manifest_path / data_file.file_path
	strRef  = 1 // data_file.referenced_data_file
)

// listSpec builds the fields to capture from a manifest-list entry.
func listSpec(fields, required ListField) map[string]fieldSpec {
	spec := map[string]fieldSpec{"manifest_path": {kind: captureString, slot: strPath, required: true}}
	add := func(f ListField, name string, slot int) {
		if fields&f != 0 {
			spec[name] = fieldSpec{kind: captureLong, slot: slot, required: required&f != 0}
		}
	}
	add(ListLength, "manifest_length", lsLength)
	add(ListSpecID, "partition_spec_id", lsSpecID)
	add(ListContent, "content", lsContent)
	add(ListSequenceNumber, "sequence_number", lsSeq)
	add(ListMinSequenceNumber, "min_sequence_number", lsMinSeq)
	add(ListAddedSnapshotID, "added_snapshot_id", lsAddedSnapshot)
	// The counts have v1 names too; neither name can be required.
	if fields&ListFileCounts != 0 {
		for _, kind := range []struct {
			name string
			slot int
		}{{"added", lsAddedFiles}, {"existing", lsExistingFiles}, {"deleted", lsDeletedFiles}} {
			spec[kind.name+"_files_count"] = fieldSpec{kind: captureLong, slot: kind.slot}
			spec[kind.name+"_data_files_count"] = fieldSpec{kind: captureLong, slot: kind.slot}
		}
	}
	add(ListRowCounts, "added_rows_count", lsAddedRows)
	add(ListRowCounts, "existing_rows_count", lsExistingRows)
	add(ListRowCounts, "deleted_rows_count", lsDeletedRows)
	return spec
}

// manifestSpec builds the fields to capture from a manifest entry.
func manifestSpec(fields ManifestField) map[string]fieldSpec {
	opt := func(f ManifestField, spec map[string]fieldSpec, name string, kind captureKind, slot int) {
		if fields&f != 0 {
			spec[name] = fieldSpec{kind: kind, slot: slot}
		}
	}
	df := map[string]fieldSpec{"file_path": {kind: captureString, slot: strPath, required: true}}
	opt(ManifestContent, df, "content", captureLong, msContent)
	opt(ManifestFileSize, df, "file_size_in_bytes", captureLong, msSize)
	opt(ManifestRecordCount, df, "record_count", captureLong, msRecords)
	opt(ManifestReferencedDataFile, df, "referenced_data_file", captureString, strRef)
	opt(ManifestContentSize, df, "content_size_in_bytes", captureLong, msContentSize)
	spec := map[string]fieldSpec{
		"status":    {kind: captureLong, slot: msStatus, required: true},
		"data_file": {kind: captureRecord, required: true, sub: df},
	}
	opt(ManifestSnapshotID, spec, "snapshot_id", captureLong, msSnapshot)
	opt(ManifestSequenceNumbers, spec, "sequence_number", captureLong, msSeq)
	opt(ManifestSequenceNumbers, spec, "file_sequence_number", captureLong, msFileSeq)
	return spec
}

// ReadList opens the manifest list at path, calls fn for each entry and
// returns the size of the file. An error returned by fn is returned as it
// is; every other error is an *Error. fn may have seen some entries before
// an error.
func ReadList(fs Opener, path string, opt ListOptions, fn func(*ListEntry) error) (size int64, err error) {
	err = open(fs, path, "manifest list", func(r io.Reader) error {
		cr := &countingReader{r: r}
		err := DecodeList(cr, path, opt, fn)
		size = cr.n
		return err
	})
	return size, err
}

// DecodeList is ReadList on an open file; path names it in errors.
func DecodeList(r io.Reader, path string, opt ListOptions, fn func(*ListEntry) error) error {
	key := 1<<62 | uint64(opt.Fields)<<16 | uint64(opt.Required&opt.Fields)
	// The fields not asked for keep their defaults from here.
	e := ListEntry{AddedSnapshotID: -1, AddedFiles: -1, ExistingFiles: -1, DeletedFiles: -1, AddedRows: -1, ExistingRows: -1, DeletedRows: -1}
	// Only what was asked for is converted: orphan planning reads 12.5
	// million entries for their path and length.
	more := opt.Fields&^ListLength != 0
	return decode(r, "manifest list", path, 0, key, func() map[string]fieldSpec { return listSpec(opt.Fields, opt.Required) }, func(c *record) error {
		if len(c.str[strPath]) == 0 {
			return fmt.Errorf("%w: manifest list entry with an empty manifest_path", ErrCorrupt)
		}
		e.Path, e.Length = c.str[strPath], c.num[lsLength]
		if more {
			e.SpecID = int32(c.num[lsSpecID])
			e.Content = int32(c.num[lsContent])
			e.SequenceNumber, e.MinSequenceNumber = c.num[lsSeq], c.num[lsMinSeq]
			e.AddedSnapshotID = orMinusOne(c, lsAddedSnapshot)
			e.AddedFiles = int32(orMinusOne(c, lsAddedFiles))
			e.ExistingFiles = int32(orMinusOne(c, lsExistingFiles))
			e.DeletedFiles = int32(orMinusOne(c, lsDeletedFiles))
			e.AddedRows = orMinusOne(c, lsAddedRows)
			e.ExistingRows = orMinusOne(c, lsExistingRows)
			e.DeletedRows = orMinusOne(c, lsDeletedRows)
		}
		return callback(fn(&e))
	})
}

func orMinusOne(c *record, slot int) int64 {
	if c.has(slot) {
		return c.num[slot]
	}
	return -1
}

// ReadManifest opens the manifest at path and calls fn for each entry,
// DELETED ones included. Errors are as ReadList's.
func ReadManifest(fs Opener, path string, opt ManifestOptions, fn func(*ManifestEntry) error) error {
	return open(fs, path, "manifest", func(r io.Reader) error { return DecodeManifest(r, path, opt, fn) })
}

// DecodeManifest is ReadManifest on an open file; path names it in errors.
func DecodeManifest(r io.Reader, path string, opt ManifestOptions, fn func(*ManifestEntry) error) error {
	key := 2<<62 | uint64(opt.Fields)
	var e ManifestEntry
	return decode(r, "manifest", path, opt.Length, key, func() map[string]fieldSpec { return manifestSpec(opt.Fields) }, func(c *record) error {
		status := c.num[msStatus]
		if status < StatusExisting || status > StatusDeleted {
			return fmt.Errorf("%w: manifest entry with invalid status %d", ErrCorrupt, status)
		}
		if len(c.str[strPath]) == 0 {
			return fmt.Errorf("%w: manifest entry with an empty file_path", ErrCorrupt)
		}
		e = ManifestEntry{
			Status:                int32(status),
			SnapshotID:            c.num[msSnapshot],
			HasSnapshotID:         c.has(msSnapshot),
			SequenceNumber:        c.num[msSeq],
			HasSequenceNumber:     c.has(msSeq),
			FileSequenceNumber:    c.num[msFileSeq],
			HasFileSequenceNumber: c.has(msFileSeq),
			Content:               int32(c.num[msContent]),
			FilePath:              c.str[strPath],
			FileSizeInBytes:       c.num[msSize],
			RecordCount:           c.num[msRecords],
			ContentSizeInBytes:    c.num[msContentSize],
			HasContentSizeInBytes: c.has(msContentSize),
		}
		if c.hasStr(strRef) && len(c.str[strRef]) > 0 {
			e.ReferencedDataFile = c.str[strRef]
		}
		return callback(fn(&e))
	})
}

// callerError marks an error of the caller's callback, returned unwrapped.
type callerError struct{ err error }

func (c callerError) Error() string { return c.err.Error() }

func callback(err error) error {
	if err != nil {
		return callerError{err}
	}
	return nil
}

// decode reads one container file with the program for key; each record
// goes to visit. When length > 0 the file must be exactly that long.
func decode(r io.Reader, what, path string, length int64, key uint64, spec func() map[string]fieldSpec, visit func(*record) error) error {
	fail := func(err error) error {
		if ce, ok := err.(callerError); ok {
			return ce.err
		}
		return &Error{What: what, Path: path, Err: err}
	}
	cr := &countingReader{r: r}
	f, err := openContainer(cr)
	if err != nil {
		return fail(err)
	}
	defer f.release()
	prog, err := programs.program(f.schema, key, spec)
	if err != nil {
		return fail(err)
	}
	var rec record
	if err := f.each(prog, &rec, func() error { return visit(&rec) }); err != nil {
		return fail(err)
	}
	if length > 0 && cr.n != length {
		kind := ErrTruncated
		if cr.n > length {
			kind = ErrCorrupt
		}
		return fail(fmt.Errorf("%w: %s is %d bytes, its manifest list says %d", kind, what, cr.n, length))
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// open opens path with fs and hands it to read, classifying a missing file.
func open(fs Opener, path, what string, read func(io.Reader) error) (err error) {
	f, err := fs.Open(path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrMissing, err)
		}
		return &Error{What: what, Path: path, Err: err}
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = &Error{What: what, Path: path, Err: fmt.Errorf("close: %w", cerr)}
		}
	}()
	return read(f)
}
