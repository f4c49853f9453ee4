package orphans

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// TestCheckUnloadable: a table that does not load is refused when its
// metadata location is unknown, under the cleaned table, outside a
// "metadata" folder, or its root contains the cleaned table; a table whose
// metadata is provably elsewhere lets the removal go on.
func TestCheckUnloadable(t *testing.T) {
	lt := newLocalTable(t, 1, 1)
	loc := strings.TrimSuffix(lt.tbl.Location(), "/")
	parent := loc[:strings.LastIndex(loc, "/")]
	cases := []struct {
		name, meta string
		refuse     bool
	}{
		{"unknown", "", true},
		{"inside the table", loc + "/data/nested/metadata/00001.metadata.json", true},
		{"root encloses the table", parent + "/metadata/00001.metadata.json", true},
		{"outside a metadata folder", parent + "/other/00001.metadata.json", true},
		{"sibling", parent + "/other/metadata/00001.metadata.json", false},
		{"prefix of the name, not a folder", loc + "-2/metadata/00001.metadata.json", false},
		{"another bucket", "s3://bucket/other/metadata/00001.metadata.json", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckUnloadable(lt.tbl, DefaultConfig(), []Unloadable{{Table: "db.broken", MetadataLocation: c.meta, Error: "truncated"}})
			if c.refuse != (err != nil) {
				t.Fatalf("err %v; want refused %v", err, c.refuse)
			}
			if err != nil && (!errors.Is(err, ErrUnloadableNeighbour) || !strings.Contains(err.Error(), "db.broken")) {
				t.Fatalf("err %v; want ErrUnloadableNeighbour naming db.broken", err)
			}
		})
	}
}

// countingLister counts the tables a Listing loads and fails the load of
// one table.
type countingLister struct {
	TableLister
	loads  atomic.Int64
	broken string
}

func (c *countingLister) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	c.loads.Add(1)
	if strings.Join(ident, ".") == c.broken {
		return nil, errors.New("unexpected end of JSON input")
	}
	return c.TableLister.LoadTable(ctx, ident)
}

type fixedLocator map[string]string

func (f fixedLocator) MetadataLocation(_ context.Context, ident table.Identifier) (string, error) {
	loc, ok := f[strings.Join(ident, ".")]
	if !ok {
		return "", errors.New("catalog database unreachable")
	}
	return loc, nil
}

// TestListingOncePerPass: the tables of a pass share one listing, each table
// loaded once, and a listing older than the pass length is made again; a
// table that does not load is Unloadable with the catalog's metadata
// location, and a location the catalog cannot give fails the listing.
func TestListingOncePerPass(t *testing.T) {
	ctx := context.Background()
	lt := newLocalTable(t, 1, 1)
	for _, name := range []string{"b", "c"} {
		if _, err := lt.cat.CreateTable(ctx, table.Identifier{"demo", name}, gen.Schema(),
			catalog.WithLocation(gen.FileURI(filepath.Join(t.TempDir(), name)))); err != nil {
			t.Fatal(err)
		}
	}
	cl := &countingLister{TableLister: lt.cat, broken: "demo.c"}
	now := time.Now()
	l := NewListing(cl, fixedLocator{"demo.c": "file:///elsewhere/c/metadata/00001.metadata.json"}, time.Minute, func() time.Time { return now })
	for _, self := range []table.Identifier{lt.tbl.Identifier(), {"demo", "b"}, lt.tbl.Identifier()} {
		nb, err := l.Neighbours(ctx, self)
		if err != nil {
			t.Fatal(err)
		}
		if len(nb.Locations) != 1 || len(nb.Unloadable) != 1 || nb.Unloadable[0].Table != "demo.c" ||
			nb.Unloadable[0].MetadataLocation != "file:///elsewhere/c/metadata/00001.metadata.json" {
			t.Fatalf("neighbours of %v: %+v", self, nb)
		}
	}
	if n := cl.loads.Load(); n != 3 {
		t.Fatalf("%d loads for three tables' checks; want 3 (one listing)", n)
	}
	now = now.Add(2 * time.Minute)
	if _, err := l.Neighbours(ctx, lt.tbl.Identifier()); err != nil {
		t.Fatal(err)
	}
	if n := cl.loads.Load(); n != 6 {
		t.Fatalf("%d loads after the pass length; want 6 (listed again)", n)
	}

	l = NewListing(cl, fixedLocator{}, 0, nil)
	if _, err := l.Neighbours(ctx, lt.tbl.Identifier()); err == nil || !strings.Contains(err.Error(), "demo.c") {
		t.Fatalf("err %v; want the listing to fail naming demo.c, whose metadata location is unknown", err)
	}
}
