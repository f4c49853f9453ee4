package manifestscan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/avro/ocf"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

func generated(t *testing.T, appends, parts, version int) *table.Table {
	t.Helper()
	_, tbl, _ := testenv.GeneratedTable(t, gen.Options{Appends: appends, RowsPerAppend: 50, Partitions: parts, Seed: 3, FormatVersion: version})
	return tbl
}

// fileBytes reads path whole; when it is missing, merr (what this package
// said when reading it) must be ErrMissing naming it, and ok is false.
func fileBytes(t *testing.T, fs iceio.IO, path string, merr error) (_ []byte, ok bool) {
	t.Helper()
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		checkError(t, "missing file", merr, ErrMissing, path)
		if !errors.Is(merr, iofs.ErrNotExist) {
			t.Errorf("missing %s: %v does not match fs.ErrNotExist", path, merr)
		}
		return nil, false
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data, true
}

// bothRead fails unless iceberg-go and this package read path alike.
func bothRead(t *testing.T, path string, theirErr, merr error, theirs, mine int) {
	t.Helper()
	if theirErr != nil {
		t.Fatalf("iceberg-go reads %s: %v", path, theirErr)
	}
	if merr != nil {
		t.Fatalf("read %s: %v", path, merr)
	}
	if mine != theirs {
		t.Fatalf("%s: %d entries, iceberg-go reads %d", path, mine, theirs)
	}
}

// TestMatchesIcebergGo decodes every manifest list and manifest of every
// fixture (written by Spark, Flink, Hive, Impala, PyIceberg) and of
// generated v1, v2 and v3 tables, and compares every field with
// iceberg-go's full decoding. A path missed in a list or manifest would
// make a live file look unreferenced.
func TestMatchesIcebergGo(t *testing.T) {
	tables := map[string]*table.Table{}
	for _, name := range testenv.FixtureNames(t) {
		_, tbl, _ := testenv.FixtureTable(t, name)
		tables[name] = tbl
	}
	for _, v := range []int{1, 2, 3} {
		tables["generated v"+strconv.Itoa(v)] = generated(t, 6, 3, v)
	}
	for name, tbl := range tables {
		t.Run(name, func(t *testing.T) {
			fs, err := tbl.FS(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lists, manifests := 0, map[string]iceberg.ManifestFile{}
			for _, s := range tbl.Metadata().Snapshots() {
				if s.ManifestList == "" {
					continue
				}
				theirs, ok := compareList(t, fs, s.ManifestList)
				if !ok {
					continue
				}
				lists++
				for _, m := range theirs {
					manifests[m.FilePath()] = m
				}
			}
			if lists == 0 {
				t.Fatal("no manifest list read")
			}
			for _, m := range manifests {
				compareManifest(t, fs, m)
			}
		})
	}
}

// compareList checks one manifest list; ok is false when the file is
// missing (some fixtures lack one on purpose), which must read as
// ErrMissing.
func compareList(t *testing.T, fs iceio.IO, path string) (_ []iceberg.ManifestFile, ok bool) {
	t.Helper()
	var mine []ListEntry
	_, merr := ReadList(fs, path, ListOptions{Fields: ListAll}, func(e *ListEntry) error {
		c := *e
		c.Path = bytes.Clone(e.Path)
		mine = append(mine, c)
		return nil
	})
	data, ok := fileBytes(t, fs, path, merr)
	if !ok {
		return nil, false
	}
	theirs, err := iceberg.ReadManifestList(bytes.NewReader(data))
	bothRead(t, path, err, merr, len(theirs), len(mine))
	for i, m := range theirs {
		if want := listEntryOf(m); !listEqual(mine[i], want) {
			t.Fatalf("%s entry %d:\n got %+v\nwant %+v", path, i, mine[i], want)
		}
	}
	decodeList := func(data []byte) ([]ListEntry, error) {
		var out []ListEntry
		err := DecodeList(bytes.NewReader(data), path, ListOptions{Fields: ListAll}, func(e *ListEntry) error {
			c := *e
			c.Path = bytes.Clone(e.Path)
			out = append(out, c)
			return nil
		})
		return out, err
	}
	for name, codec := range codecs(t) {
		got, err := decodeList(reencode(t, data, codec))
		if err != nil || len(got) != len(mine) {
			t.Fatalf("%s as %s: %d entries, err %v; want %d", path, name, len(got), err, len(mine))
		}
		for i := range got {
			if !listEqual(got[i], mine[i]) {
				t.Fatalf("%s as %s, entry %d: %+v, want %+v", path, name, i, got[i], mine[i])
			}
		}
	}
	// A truncated list fails or reads short (cut at a block end), never
	// as the whole list.
	for _, n := range truncations(len(data)) {
		got, err := decodeList(data[:n])
		if err == nil && len(got) == len(mine) {
			t.Fatalf("%s: %d of %d bytes read as a whole list", path, n, len(data))
		}
		if err != nil {
			checkError(t, fmt.Sprintf("%s cut at %d", path, n), err, ErrTruncated, path)
		}
	}
	return theirs, true
}

func codecs(t *testing.T) map[string]ocf.Codec {
	zstd, err := ocf.ZstdCodec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]ocf.Codec{"null": nil, "deflate": ocf.DeflateCodec(6), "snappy": ocf.SnappyCodec(), "zstandard": zstd}
}

func truncations(n int) []int {
	return []int{0, 3, 10, n / 3, n / 2, n - 17, n - 1}
}

func listEqual(a, b ListEntry) bool {
	type fields struct {
		ListEntry
		Path string
	}
	strip := func(e ListEntry) fields {
		p := string(e.Path)
		e.Path = nil
		return fields{e, p}
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func compareManifest(t *testing.T, fs iceio.IO, m iceberg.ManifestFile) {
	t.Helper()
	path := m.FilePath()
	var mine []ManifestEntry
	merr := ReadManifest(fs, path, ManifestOptions{Fields: ManifestAll, Length: m.Length()}, func(e *ManifestEntry) error {
		c := *e
		c.FilePath, c.ReferencedDataFile = bytes.Clone(e.FilePath), bytes.Clone(e.ReferencedDataFile)
		mine = append(mine, c)
		return nil
	})
	data, ok := fileBytes(t, fs, path, merr)
	if !ok {
		return
	}
	theirs, err := iceberg.ReadManifest(m, bytes.NewReader(data), false)
	bothRead(t, path, err, merr, len(theirs), len(mine))
	decode := func(data []byte, length int64) ([]ManifestEntry, error) {
		var out []ManifestEntry
		err := DecodeManifest(bytes.NewReader(data), path, ManifestOptions{Fields: ManifestAll, Length: length}, func(e *ManifestEntry) error {
			c := *e
			c.FilePath, c.ReferencedDataFile = bytes.Clone(e.FilePath), bytes.Clone(e.ReferencedDataFile)
			out = append(out, c)
			return nil
		})
		return out, err
	}
	for name, codec := range codecs(t) {
		got, err := decode(reencode(t, data, codec), 0)
		if err != nil || !reflect.DeepEqual(got, mine) {
			t.Fatalf("%s as %s: %+v, err %v; want %+v", path, name, got, err, mine)
		}
	}
	// Checked against its recorded length, a manifest cut anywhere fails.
	for _, n := range truncations(len(data)) {
		_, err := decode(data[:n], m.Length())
		checkError(t, fmt.Sprintf("%s cut at %d", path, n), err, ErrTruncated, path)
	}
	for i, e := range theirs {
		got, df := mine[i], e.DataFile()
		var ref []byte
		if r := df.ReferencedDataFile(); r != nil && *r != "" {
			ref = []byte(*r)
		}
		bad := got.Status != int32(e.Status()) || string(got.FilePath) != df.FilePath() ||
			got.Content != int32(df.ContentType()) || got.FileSizeInBytes != df.FileSizeBytes() ||
			got.RecordCount != df.Count() || !bytes.Equal(got.ReferencedDataFile, ref)
		// Null snapshot and sequence numbers are inherited from the
		// manifest, which iceberg-go does as it reads.
		if got.HasSnapshotID {
			bad = bad || got.SnapshotID != e.SnapshotID()
		} else {
			bad = bad || e.SnapshotID() != m.SnapshotID()
		}
		if got.HasSequenceNumber {
			bad = bad || got.SequenceNumber != e.SequenceNum()
		}
		if fsn := e.FileSequenceNum(); got.HasFileSequenceNumber && (fsn == nil || *fsn != got.FileSequenceNumber) {
			bad = true
		}
		if cs := df.ContentSizeInBytes(); (cs != nil) != got.HasContentSizeInBytes || cs != nil && *cs != got.ContentSizeInBytes {
			bad = true
		}
		if bad {
			t.Fatalf("%s entry %d: got %+v; iceberg-go: status %d path %s content %d size %d records %d ref %q snapshot %d seq %d",
				path, i, got, e.Status(), df.FilePath(), df.ContentType(), df.FileSizeBytes(), df.Count(), ref, e.SnapshotID(), e.SequenceNum())
		}
	}
}
