package testenv

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// NoStrayMetadata fails unless every metadata file in the metadata folder
// of tbl (a local table) is its current one or one its metadata log lists:
// what a table must look like after a lost commit attempt that cleaned up,
// or a commit of a table with write.metadata.delete-after-commit.enabled.
func NoStrayMetadata(t testing.TB, tbl *table.Table) {
	t.Helper()
	known := map[string]bool{path.Base(tbl.MetadataLocation()): true}
	for e := range tbl.Metadata().PreviousFiles() {
		known[path.Base(e.MetadataFile)] = true
	}
	u, err := url.Parse(tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Dir(u.Path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".metadata.json") && !known[e.Name()] {
			t.Errorf("metadata file %s is neither current nor in the metadata log", e.Name())
		}
	}
}
