package main

// Real-process fleet tests on the in-process S3 server: the tables' files
// live there, so a test can stall one replica's object writes until it has
// killed that replica, and know the kill landed mid-compaction.

import (
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/s3test"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// fleetBucket holds the warehouse of the S3 tests.
const fleetBucket = "warehouse"

// s3Catalog is sqliteCatalog with the tables' files on srv: the catalog in
// dir/catalog.db, the warehouse s3://warehouse/wh, and the config's catalog
// properties pointed at the server. The test's own connections (the writer,
// the checks) reach the server as localhost, the maintainers as 127.0.0.1,
// so a stall can tell their requests apart by the Host header.
func s3Catalog(srv *s3test.Server) catalogSetup {
	return func(t *testing.T, dir string) (openCatalogFunc, string) {
		db := filepath.Join(dir, "catalog.db")
		open := func(ctx context.Context) (*sqlcat.Catalog, error) {
			props := iceberg.Properties{"type": "sql", "uri": sqliteuri.DSN(db), sqlcat.DriverKey: sqliteshim.ShimName,
				sqlcat.DialectKey: string(sqlcat.SQLite), "warehouse": "s3://" + fleetBucket + "/wh", "init_catalog_tables": "true"}
			maps.Copy(props, srv.Props())
			props["s3.endpoint"] = strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
			c, err := catalog.Load(ctx, genCatalog, props)
			if err != nil {
				return nil, err
			}
			return c.(*sqlcat.Catalog), nil
		}
		_, text := sqliteCatalog(t, dir)
		var props strings.Builder
		props.WriteString("    sql.dialect: sqlite\n")
		for _, k := range []string{"s3.endpoint", "s3.region", "s3.access-key-id", "s3.secret-access-key", "s3.path-style-access"} {
			props.WriteString("    " + k + ": \"" + srv.Props()[k] + "\"\n")
		}
		local := "  warehouse: \"file://" + filepath.ToSlash(dir) + "/warehouse\"\n"
		out := strings.Replace(text, local, "  warehouse: \"s3://"+fleetBucket+"/wh\"\n", 1)
		out = strings.Replace(out, "    sql.dialect: sqlite\n", props.String(), 1)
		if out == text || !strings.Contains(out, "s3.endpoint") || strings.Contains(out, local) {
			t.Fatalf("the default config was not moved onto S3:\n%s", out)
		}
		return open, out
	}
}

// writeStall holds back one object write of a compaction on srv: it lets
// the maintainers' first `pass` data-file PUTs under prefix through
// (recording their keys), then stalls the next one, without an answer, until its writer is
// gone (killed), and lets the later ones through. Stalled is closed when
// that write arrives.
type writeStall struct {
	Stalled chan struct{}

	mu      sync.Mutex
	armed   bool
	pass    int
	passed  []string // keys written before the stall
	stalled string   // the key of the first stalled write
}

// stallWrites arms a writeStall on srv for data files whose key holds
// prefix ("wh/demo.db/big0/data/").
func stallWrites(srv *s3test.Server, prefix string, pass int) *writeStall {
	s := &writeStall{Stalled: make(chan struct{}), armed: true, pass: pass}
	srv.StallWhen(func(op string, r *http.Request) bool {
		if op != "PutObject" || !strings.HasPrefix(r.Host, "127.0.0.1:") || // not the test's own writer
			!strings.Contains(r.URL.Path, prefix) || !strings.HasSuffix(r.URL.Path, ".parquet") {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.armed {
			return false
		}
		key := strings.TrimPrefix(r.URL.Path, "/"+fleetBucket+"/")
		if len(s.passed) < s.pass {
			s.passed = append(s.passed, key)
			return false
		}
		if s.stalled != "" {
			return false
		}
		s.stalled = key
		close(s.Stalled)
		return true
	})
	return s
}

// release disarms the stall and says what it saw; the stalled write ends
// when its client goes.
func (s *writeStall) release() (passed []string, stalled string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	return s.passed, s.stalled
}

// verifyS3 reads a table's metadata file on srv with the independent
// verifier, from a copy of the table's files on local disk.
func verifyS3(t *testing.T, srv *s3test.Server, metadata string) testenv.VerifyResult {
	t.Helper()
	rel, ok := strings.CutPrefix(metadata, "s3://"+fleetBucket+"/")
	i := strings.LastIndex(rel, "/metadata/")
	if !ok || i < 0 {
		t.Fatalf("metadata location %q is not a table's in s3://%s", metadata, fleetBucket)
	}
	root := t.TempDir()
	for key := range srv.Keys(t, fleetBucket) {
		if !strings.HasPrefix(key, rel[:i+1]) {
			continue
		}
		obj, err := srv.Backend.GetObject(fleetBucket, key, nil)
		if err != nil {
			t.Fatalf("read s3://%s/%s: %v", fleetBucket, key, err)
		}
		b, err := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if err != nil {
			t.Fatalf("read s3://%s/%s: %v", fleetBucket, key, err)
		}
		local := filepath.Join(root, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return testenv.Verify(t, filepath.Join(root, filepath.FromSlash(rel)), testenv.MapLocation("s3://"+fleetBucket, root))
}

// fileHistory is what a table's snapshots say about its data files: how
// often each was added and removed by a compaction, and every data file any
// snapshot references.
type fileHistory struct {
	commits    int
	added      map[string]int // by compaction commits
	removed    map[string]int // by compaction commits
	referenced map[string]bool
}

func historyOf(t *testing.T, w *genWarehouse, name string) fileHistory {
	t.Helper()
	h := fileHistory{added: map[string]int{}, removed: map[string]int{}, referenced: map[string]bool{}}
	w.withTable(t, name, func(tbl *table.Table) {
		ctx := t.Context()
		fs, err := tbl.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Metadata().Snapshots() {
			compaction := s.Summary != nil && s.Summary.Properties["maintainer.operation"] == "compact"
			if compaction {
				h.commits++
			}
			mans, err := s.Manifests(fs)
			if err != nil {
				t.Fatalf("%s: manifest list of snapshot %d: %v", name, s.SnapshotID, err)
			}
			for _, m := range mans {
				for e, err := range m.Entries(fs, false) {
					if err != nil {
						t.Fatalf("%s: manifest %s: %v", name, m.FilePath(), err)
					}
					path := e.DataFile().FilePath()
					if e.Status() != iceberg.EntryStatusDELETED {
						h.referenced[path] = true
					}
					if !compaction || e.SnapshotID() != s.SnapshotID {
						continue
					}
					switch e.Status() {
					case iceberg.EntryStatusADDED:
						h.added[path]++
					case iceberg.EntryStatusDELETED:
						h.removed[path]++
					}
				}
			}
		}
	})
	return h
}

// expectEachFileOnce fails the test unless each compaction input was removed
// by exactly one commit and each output added by exactly one, and unless
// every file any snapshot references is still in the bucket (no live file
// deleted).
func expectEachFileOnce(t *testing.T, srv *s3test.Server, name string, h fileHistory) {
	t.Helper()
	for p, n := range h.removed {
		if n != 1 {
			t.Errorf("%s: %s removed by %d compaction commits; want one", name, p, n)
		}
	}
	for p, n := range h.added {
		if n != 1 {
			t.Errorf("%s: %s added by %d compaction commits; want one", name, p, n)
		}
	}
	keys := srv.Keys(t, fleetBucket)
	for p := range h.referenced {
		if !keys[strings.TrimPrefix(p, "s3://"+fleetBucket+"/")] {
			t.Errorf("%s: %s is referenced by a snapshot but no longer in the bucket", name, p)
		}
	}
}
