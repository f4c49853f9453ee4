package orphans

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
)

// ErrUnloadableNeighbour: another table of the catalog could not be loaded
// and may share the cleaned table's location.
var ErrUnloadableNeighbour = errors.New("another table of the catalog could not be loaded")

// TableLister is the part of an iceberg-go catalog that a Listing needs.
type TableLister interface {
	ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error)
	ListTables(ctx context.Context, namespace table.Identifier) iter.Seq2[table.Identifier, error]
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
}

// MetadataLocator says where a table's current metadata file is, from what
// the catalog stores, without reading that file (the SQL catalog's
// iceberg_tables.metadata_location); "" when the catalog does not say.
type MetadataLocator interface {
	MetadataLocation(ctx context.Context, ident table.Identifier) (string, error)
}

// Unloadable is a table of the catalog that could not be loaded.
type Unloadable struct {
	Table string `json:"table"`
	// MetadataLocation is the catalog's pointer to its metadata file; ""
	// when the catalog does not say without loading the table.
	MetadataLocation string `json:"metadata_location,omitempty"`
	Error            string `json:"error"`
}

// Neighbours are the other tables of the catalog, as the shared-location
// check sees them.
type Neighbours struct {
	Locations  []string     // of the tables that loaded
	Unloadable []Unloadable // the tables that did not
}

type listedTable struct {
	ident      table.Identifier
	location   string      // "" when it did not load
	unloadable *Unloadable // when it did not load
}

// Listing is the catalog's tables with their locations, listed on first
// need and shared by every table of a pass, so that a pass over N tables
// loads each table once for the check, not N times. A listing older than
// maxAge is made again (serve runs for days: a pass there is a poll
// interval). A table created after the listing was made is not in it: the
// same risk as a table created between the listing and the deletes of one
// table's removal, which a listing per table had as well.
type Listing struct {
	cat    TableLister
	meta   MetadataLocator // nil: the catalog says nothing without loading
	maxAge time.Duration   // 0: never made again
	now    func() time.Time

	mu     sync.Mutex
	tables []listedTable
	made   time.Time
}

// NewListing returns a Listing of cat's tables, made again when older than
// maxAge (0: made once). meta may be nil.
func NewListing(cat TableLister, meta MetadataLocator, maxAge time.Duration, now func() time.Time) *Listing {
	if now == nil {
		now = time.Now
	}
	return &Listing{cat: cat, meta: meta, maxAge: maxAge, now: now}
}

// Neighbours returns every table of the catalog but self. A listing error
// is returned (a table whose location is unknown could live under the one
// being cleaned); a table that does not load is in Unloadable, for
// CheckUnloadable to judge.
func (l *Listing) Neighbours(ctx context.Context, self table.Identifier) (Neighbours, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tables == nil || (l.maxAge > 0 && l.now().Sub(l.made) > l.maxAge) {
		made := l.now()
		tables, err := l.list(ctx)
		if err != nil {
			return Neighbours{}, err
		}
		l.tables, l.made = tables, made
	}
	var n Neighbours
	for _, t := range l.tables {
		switch {
		case slices.Equal(t.ident, self):
		case t.unloadable != nil:
			n.Unloadable = append(n.Unloadable, *t.unloadable)
		default:
			n.Locations = append(n.Locations, t.location)
		}
	}
	return n, nil
}

// list walks nested namespaces and loads each table once, keeping only its
// location.
func (l *Listing) list(ctx context.Context) ([]listedTable, error) {
	out := []listedTable{}
	seen := map[string]bool{}
	var walk func(parent table.Identifier) error
	walk = func(parent table.Identifier) error {
		nss, err := l.cat.ListNamespaces(ctx, parent)
		if err != nil {
			return fmt.Errorf("list namespaces of %q: %w", strings.Join(parent, "."), err)
		}
		for _, ns := range nss {
			key := strings.Join(ns, "\x00")
			if seen[key] || len(ns) <= len(parent) {
				continue
			}
			seen[key] = true
			for ident, err := range l.cat.ListTables(ctx, ns) {
				if err != nil {
					return fmt.Errorf("list tables of %s: %w", strings.Join(ns, "."), err)
				}
				t, err := l.load(ctx, ident)
				if err != nil {
					return err
				}
				out = append(out, t)
			}
			if err := walk(ns); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return nil, err
	}
	return out, nil
}

func (l *Listing) load(ctx context.Context, ident table.Identifier) (listedTable, error) {
	t, err := l.cat.LoadTable(ctx, ident)
	if err == nil {
		return listedTable{ident: ident, location: t.Metadata().Location()}, nil
	}
	if ctx.Err() != nil {
		return listedTable{}, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
	}
	u := &Unloadable{Table: strings.Join(ident, "."), Error: err.Error()}
	if l.meta != nil {
		loc, lerr := l.meta.MetadataLocation(ctx, ident)
		if lerr != nil {
			// Not knowing where it is, it cannot be ruled out anywhere.
			return listedTable{}, fmt.Errorf("load table %s: %w; and %w", u.Table, err, lerr)
		}
		u.MetadataLocation = loc
	}
	return listedTable{ident: ident, unloadable: u}, nil
}

// CheckUnloadable refuses (ErrUnloadableNeighbour, naming the table and
// why) when a table of the catalog that could not be loaded may share
// tbl's location: its metadata location is unknown, lies under tbl's
// location, or tbl's location lies under its root (the metadata location
// without /metadata/<file>). Otherwise that table provably has its metadata
// elsewhere, and the removal goes on. The rule trusts the usual layout
// (metadata under <location>/metadata/): a broken table whose metadata was
// written elsewhere (write.metadata.path) with its data under tbl could
// not be told apart without its metadata, so a metadata file outside a
// "metadata" folder is refused too.
func CheckUnloadable(tbl *table.Table, cfg Config, unloadable []Unloadable) error {
	if len(unloadable) == 0 {
		return nil
	}
	sc, err := newScope(tbl.Metadata(), cfg)
	if err != nil {
		return err
	}
	for _, u := range unloadable {
		if u.MetadataLocation == "" {
			return fmt.Errorf("%w: table %s (%s), and the catalog does not say where its metadata is, so it may live under %s",
				ErrUnloadableNeighbour, u.Table, u.Error, tbl.Location())
		}
		dir, _ := path.Split(u.MetadataLocation)
		dir = strings.TrimSuffix(dir, "/")
		root, base := path.Split(dir)
		if base != "metadata" {
			return fmt.Errorf("%w: table %s (%s) has its metadata file %s outside a metadata folder, so its location is unknown and may be under %s",
				ErrUnloadableNeighbour, u.Table, u.Error, u.MetadataLocation, tbl.Location())
		}
		ml, err := parseLoc(u.MetadataLocation)
		if err != nil {
			return fmt.Errorf("%w: table %s (%s): cannot compare its metadata location %s: %v", ErrUnloadableNeighbour, u.Table, u.Error, u.MetadataLocation, err)
		}
		rl, err := parseLoc(strings.TrimSuffix(root, "/"))
		if err != nil {
			return fmt.Errorf("%w: table %s (%s): cannot compare its root %s: %v", ErrUnloadableNeighbour, u.Table, u.Error, root, err)
		}
		if sc.norm.under(ml, sc.tableLoc) || sc.norm.under(sc.tableLoc, rl) {
			return fmt.Errorf("%w: table %s (%s) has its metadata at %s, so its files may be under %s",
				ErrUnloadableNeighbour, u.Table, u.Error, u.MetadataLocation, tbl.Location())
		}
	}
	return nil
}
