package manifestscan

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// writeContainer writes an Avro container file by hand: a header with the
// given schema and codec, then the blocks (each count records of raw data).
func writeContainer(schema, codec string, blocks ...block) []byte {
	var b []byte
	long := func(v int64) { b = binary.AppendVarint(b, v) }
	str := func(s string) { long(int64(len(s))); b = append(b, s...) }
	b = append(b, avroMagic...)
	long(2)
	str("avro.schema")
	str(schema)
	str("avro.codec")
	str(codec)
	long(0)
	sync := []byte("0123456789abcdef")
	b = append(b, sync...)
	for _, bl := range blocks {
		long(bl.count)
		long(int64(len(bl.data)))
		b = append(b, bl.data...)
		b = append(b, sync...)
	}
	return b
}

type block struct {
	count int64
	data  []byte
}

// listRecord encodes one entry of listSchema.
func listRecord(path string, length int64) []byte {
	b := binary.AppendVarint(nil, int64(len(path)))
	b = append(b, path...)
	return binary.AppendVarint(b, length)
}

const listSchema = `{"type":"record","name":"manifest_file","fields":[
	{"name":"manifest_path","type":"string"},{"name":"manifest_length","type":"long"}]}`

// checkError asserts that err is an *Error for path wrapping want, and that
// its message names the file.
func checkError(t *testing.T, what string, err, want error, path string) {
	t.Helper()
	var e *Error
	if !errors.Is(err, want) || !errors.As(err, &e) || e.Path != path || !strings.Contains(err.Error(), path) {
		t.Errorf("%s: err %v; want %v naming %s", what, err, want, path)
	}
}

func TestErrorClasses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := writeContainer(listSchema, "null", block{2, append(listRecord("a.avro", 10), listRecord("b.avro", 20)...)})
	readList := func(path string, opt ListOptions) error {
		_, err := ReadList(iceio.LocalFS{}, path, opt, func(*ListEntry) error { return nil })
		return err
	}
	if err := readList(write("good.avro", good), ListOptions{Fields: ListLength}); err != nil {
		t.Fatalf("good list: %v", err)
	}

	missing := filepath.Join(dir, "missing.avro")
	err := readList(missing, ListOptions{})
	checkError(t, "missing list", err, ErrMissing, missing)
	if !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("missing list: %v does not match fs.ErrNotExist", err)
	}
	err = ReadManifest(iceio.LocalFS{}, missing, ManifestOptions{}, func(*ManifestEntry) error { return nil })
	checkError(t, "missing manifest", err, ErrMissing, missing)

	for _, n := range []int{0, 2, 4, 9, 30, len(good) - 20, len(good) - 17, len(good) - 1} {
		p := write("truncated-"+strconv.Itoa(n)+".avro", good[:n])
		checkError(t, "truncated at "+strconv.Itoa(n), readList(p, ListOptions{}), ErrTruncated, p)
	}
	// A byte after the last block starts a block that is not there.
	p := write("trailing.avro", append(good[:len(good):len(good)], 0x02))
	checkError(t, "trailing byte", readList(p, ListOptions{}), ErrTruncated, p)
	p = write("magic.avro", append([]byte("Obj\x02"), good[4:]...))
	checkError(t, "bad magic", readList(p, ListOptions{}), ErrBadMagic, p)
	p = write("text.avro", []byte("no"))
	checkError(t, "short text", readList(p, ListOptions{}), ErrBadMagic, p)

	p = write("bzip2.avro", writeContainer(listSchema, "bzip2"))
	checkError(t, "unknown codec", readList(p, ListOptions{}), ErrUnknownCodec, p)

	noLength := `{"type":"record","name":"manifest_file","fields":[{"name":"manifest_path","type":"string"}]}`
	p = write("nolength.avro", writeContainer(noLength, "null", block{1, []byte("\x02a")}))
	if err := readList(p, ListOptions{Fields: ListLength}); err != nil {
		t.Errorf("optional manifest_length: %v", err)
	}
	checkError(t, "required manifest_length", readList(p, ListOptions{Fields: ListLength, Required: ListLength}), ErrMissingField, p)
	noPath := `{"type":"record","name":"manifest_file","fields":[{"name":"manifest_length","type":"long"}]}`
	p = write("nopath.avro", writeContainer(noPath, "null", block{1, []byte{0x02}}))
	checkError(t, "no manifest_path", readList(p, ListOptions{}), ErrMissingField, p)
	err = ReadManifest(iceio.LocalFS{}, p, ManifestOptions{}, func(*ManifestEntry) error { return nil })
	checkError(t, "no status", err, ErrMissingField, p)

	intPath := `{"type":"record","name":"manifest_file","fields":[{"name":"manifest_path","type":"int"}]}`
	p = write("intpath.avro", writeContainer(intPath, "null"))
	checkError(t, "int manifest_path", readList(p, ListOptions{}), ErrBadSchema, p)
	p = write("json.avro", writeContainer("{", "null"))
	checkError(t, "bad JSON", readList(p, ListOptions{}), ErrBadSchema, p)

	corrupt := map[string][]byte{
		"sync":    append(good[:len(good)-1:len(good)-1], good[len(good)-1]^0xff),
		"left":    writeContainer(listSchema, "null", block{1, append(listRecord("a", 1), 0)}),
		"short":   writeContainer(listSchema, "null", block{3, listRecord("a", 1)}),
		"empty":   writeContainer(listSchema, "null", block{1, listRecord("", 1)}),
		"deflate": writeContainer(listSchema, "deflate", block{1, []byte("not deflate")}),
	}
	for name, data := range corrupt {
		p := write("corrupt-"+name+".avro", data)
		checkError(t, "corrupt "+name, readList(p, ListOptions{}), ErrCorrupt, p)
	}

	// The caller's own error comes back as it is.
	mine := errors.New("stop")
	if _, err := ReadList(iceio.LocalFS{}, write("again.avro", good), ListOptions{}, func(*ListEntry) error { return mine }); err != mine {
		t.Errorf("callback error: %v", err)
	}
}

func TestProgramCacheBound(t *testing.T) {
	pc := newProgramCache(3)
	spec := func() map[string]fieldSpec { return listSpec(ListLength, 0) }
	schema := func(i int) []byte {
		return []byte(strings.Replace(listSchema, "manifest_file", "manifest_file_"+strconv.Itoa(i), 1))
	}
	if _, err := pc.program(schema(0), 1, spec); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		if _, err := pc.program(schema(i), 1, spec); err != nil {
			t.Fatal(err)
		}
		if _, err := pc.program(schema(0), 1, spec); err != nil { // keep 0 recently used
			t.Fatal(err)
		}
		if n := pc.len(); n > 3 {
			t.Fatalf("%d schemas cached, bound 3", n)
		}
	}
	if pc.len() != 3 {
		t.Fatalf("%d schemas cached, want 3", pc.len())
	}
	_, stale := pc.m[string(schema(1))]
	_, recent := pc.m[string(schema(0))]
	if stale || !recent {
		t.Error("the least recently used schema stayed, or the most recently used one left")
	}
	if programs.max != 64 {
		t.Errorf("shared cache bound %d", programs.max)
	}
}

// A null in one record leaves nothing of the record before.
func TestNullsDoNotCarryOver(t *testing.T) {
	schema := `{"type":"record","name":"manifest_file","fields":[
		{"name":"manifest_path","type":"string"},
		{"name":"added_snapshot_id","type":["null","long"]},
		{"name":"added_files_count","type":["null","int"]}]}`
	rec := func(path string, v int64) []byte {
		b := binary.AppendVarint(nil, int64(len(path)))
		b = append(b, path...)
		if v < 0 {
			return append(b, 0, 0) // both null
		}
		b = binary.AppendVarint(append(b, 2), v)
		return binary.AppendVarint(append(b, 2), v)
	}
	data := writeContainer(schema, "null", block{3, append(append(rec("a", 5), rec("b", -1)...), rec("c", 7)...)})
	var got []ListEntry
	err := DecodeList(bytes.NewReader(data), "nulls.avro", ListOptions{Fields: ListAll}, func(e *ListEntry) error {
		got = append(got, ListEntry{AddedSnapshotID: e.AddedSnapshotID, AddedFiles: e.AddedFiles})
		return nil
	})
	want := []ListEntry{{AddedSnapshotID: 5, AddedFiles: 5}, {AddedSnapshotID: -1, AddedFiles: -1}, {AddedSnapshotID: 7, AddedFiles: 7}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, err %v; want %+v", got, err, want)
	}
}

// A v1 snapshot that embeds its manifest locations reads like one with a
// list.
func TestReadSnapshotEmbedded(t *testing.T) {
	tbl := generated(t, 3, 1, 1)
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cur := tbl.CurrentSnapshot()
	var fromList []ListEntry
	size, err := ReadSnapshot(fs, cur, ListOptions{Fields: ListLength}, func(e *ListEntry) error {
		fromList = append(fromList, ListEntry{Path: bytes.Clone(e.Path), Length: e.Length})
		return nil
	})
	if err != nil || size == 0 || len(fromList) != 3 {
		t.Fatalf("%d entries, list of %d bytes, err %v", len(fromList), size, err)
	}
	embedded := table.Snapshot{SnapshotID: cur.SnapshotID}
	for _, e := range fromList {
		embedded.ManifestLocations = append(embedded.ManifestLocations, string(e.Path))
	}
	var got []ListEntry
	size, err = ReadSnapshot(fs, &embedded, ListOptions{Fields: ListLength}, func(e *ListEntry) error {
		got = append(got, ListEntry{Path: bytes.Clone(e.Path), Length: e.Length})
		if e.AddedSnapshotID != cur.SnapshotID {
			t.Errorf("added by %d, want %d", e.AddedSnapshotID, cur.SnapshotID)
		}
		return nil
	})
	if err != nil || size != 0 || !reflect.DeepEqual(got, fromList) {
		t.Fatalf("embedded: %+v (size %d, err %v); from the list %+v", got, size, err, fromList)
	}
}
