package avrofile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRoundTrip decodes every Avro file of the fixtures, writes it back and
// checks that the copy decodes to the same header and records.
func TestRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/fixtures/*/metadata/*.avro")
	if err != nil || len(files) < 100 {
		t.Fatalf("fixture Avro files: %d, %v", len(files), err)
	}
	dir := t.TempDir()
	for i, name := range files {
		a, err := Read(name)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, filepath.Base(name))
		size, err := a.Write(out, [16]byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(out); err != nil || fi.Size() != size {
			t.Fatalf("%s: size %d, stat %v", out, size, err)
		}
		b, err := Read(out)
		if err != nil {
			t.Fatal(err)
		}
		// A null codec may be written as no avro.codec key (the spec's default).
		for _, m := range []map[string][]byte{a.Meta, b.Meta} {
			if string(m["avro.codec"]) == "null" {
				delete(m, "avro.codec")
			}
		}
		if !reflect.DeepEqual(a.Meta, b.Meta) || !reflect.DeepEqual(a.Records, b.Records) {
			t.Errorf("%s: the copy differs", name)
		}
		if strings.HasPrefix(filepath.Base(name), "snap-") {
			continue
		}
		if names, err := a.FieldNames("data_file", "partition"); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if df, _ := a.Records[0]["data_file"].(map[string]any); len(a.Records) > 0 && len(df["partition"].(map[string]any)) != len(names) {
			t.Errorf("%s: partition fields %v, record %v", name, names, df["partition"])
		}
	}
}
