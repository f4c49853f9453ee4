package manifestscan

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/avro/ocf"
)

type listEntry struct {
	path   string
	length int64
}

func readList(data []byte) ([]listEntry, error) {
	var out []listEntry
	err := DecodeList(bytes.NewReader(data), "test.avro", ListOptions{Fields: ListLength}, func(e *ListEntry) error {
		out = append(out, listEntry{string(e.Path), e.Length})
		return nil
	})
	return out, err
}

// readManifestPaths reads the live paths of a manifest (as orphan planning
// does), checking its length when length > 0.
func readManifestPaths(data []byte, length int64) ([]string, error) {
	var out []string
	err := DecodeManifest(bytes.NewReader(data), "test.avro", ManifestOptions{Length: length}, func(e *ManifestEntry) error {
		if e.Status != StatusDeleted {
			out = append(out, string(e.FilePath))
		}
		return nil
	})
	return out, err
}

func readManifest(data []byte) ([]string, error) { return readManifestPaths(data, 0) }

// reencode rewrites an Avro container file with another codec and small
// blocks, through a general Avro library.
func reencode(t *testing.T, data []byte, codec ocf.Codec) []byte {
	t.Helper()
	rd, err := ocf.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string][]byte{}
	for k, v := range rd.Metadata() {
		if !strings.HasPrefix(k, "avro.") {
			meta[k] = v
		}
	}
	var buf bytes.Buffer
	opts := []ocf.WriterOpt{ocf.WithBlockCount(3), ocf.WithMetadata(meta)}
	if codec != nil {
		opts = append(opts, ocf.WithCodec(codec))
	}
	w, err := ocf.NewWriter(&buf, rd.Schema(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var v any
		if err := rd.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if err := w.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAvroReaderCodecsBlocksAndDamage(t *testing.T) {
	tbl := generated(t, 8, 2, 2)
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listData, _ := fileBytes(t, fs, tbl.CurrentSnapshot().ManifestList, nil)
	want, err := readList(listData)
	if err != nil || len(want) != 8 {
		t.Fatalf("%d entries, err %v", len(want), err)
	}
	manifestData, _ := fileBytes(t, fs, want[0].path, nil)
	wantPaths, err := readManifest(manifestData)
	if err != nil || len(wantPaths) != 1 {
		t.Fatalf("manifest paths %v, err %v", wantPaths, err)
	}
	zstd, err := ocf.ZstdCodec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, codec := range map[string]ocf.Codec{"null": nil, "deflate": ocf.DeflateCodec(6), "snappy": ocf.SnappyCodec(), "zstandard": zstd} {
		t.Run(name, func(t *testing.T) {
			got, err := readList(reencode(t, listData, codec))
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("list: %v, err %v; want %v", got, err, want)
			}
			paths, err := readManifest(reencode(t, manifestData, codec))
			if err != nil || !slices.Equal(paths, wantPaths) {
				t.Fatalf("manifest: %v, err %v", paths, err)
			}
		})
	}

	// Damage of any kind is an error, never a shorter list.
	damaged := map[string][]byte{
		"bad magic":        append([]byte("Obj\x02"), listData[4:]...),
		"truncated header": listData[:20],
		"truncated block":  listData[:len(listData)-40],
		"no sync marker":   listData[:len(listData)-16],
		"bad sync marker":  append(slices.Clone(listData[:len(listData)-1]), listData[len(listData)-1]^0xff),
		"trailing garbage": append(slices.Clone(listData), 0x02),
	}
	for name, data := range damaged {
		if got, err := readList(data); err == nil {
			t.Errorf("%s: read %d entries without an error", name, len(got))
		}
	}
	// A manifest whose length differs from what its manifest list records
	// (truncated, even at a block boundary) is refused.
	size := int64(len(manifestData))
	if want[0].length != size {
		t.Fatalf("manifest list records %d bytes, the file has %d", want[0].length, size)
	}
	for _, length := range []int64{size + 100, size - 1} {
		_, err := readManifestPaths(manifestData, length)
		if err == nil || !strings.Contains(err.Error(), "its manifest list says") {
			t.Errorf("length %d: err %v", length, err)
		}
	}
	// A manifest is not a manifest list, and the other way round.
	if _, err := readList(manifestData); err == nil || !strings.Contains(err.Error(), "manifest_path") {
		t.Errorf("manifest read as a manifest list: %v", err)
	}
	if _, err := readManifest(listData); err == nil {
		t.Error("manifest list read as a manifest")
	}
}
