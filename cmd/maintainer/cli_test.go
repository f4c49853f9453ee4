package main

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

// A SQLite catalog configured with a plain file URI (as users and the
// embedded default write it) must wait for another connection's write lock
// rather than fail the commit with SQLITE_BUSY: tables committing in
// parallel share the database, and so do writers.
func TestSQLiteCatalogCommitWaitsForAnotherWriter(t *testing.T) {
	ctx := t.Context()
	db, _ := sqliteTable(t)

	cat, err := openCatalog(ctx, config.CatalogConfig{
		Name: "demo", Type: config.CatalogSQL, URI: "file:" + filepath.ToSlash(db),
		Props:    map[string]string{"sql.driver": sqliteshim.ShimName, "sql.dialect": "sqlite"},
		Requests: catalogcall.DefaultConfig(),
	}, objstore.S3{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.(catalog.Closer).Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"ns", "t"})
	if err != nil {
		t.Fatal(err)
	}

	// Another connection holds the write lock for a moment.
	released := holdWriteLock(t, db, 500*time.Millisecond)

	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{"maintainer.test": "waited"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit while another connection held the write lock: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	tbl, err = cat.LoadTable(ctx, table.Identifier{"ns", "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.Properties()["maintainer.test"]; got != "waited" {
		t.Errorf("property after commit = %q; want waited", got)
	}
}

// status counts the partitions compact.where keeps out apart from those
// needing no compaction: they are neither done nor left.
func TestStatusNamesThePartitionsOutsideCompactWhere(t *testing.T) {
	var b strings.Builder
	writeHealth(&b, maintenance.Health{Table: "db.t", Partitions: 5, PartitionsToCompact: 1, PartitionsOutOfScope: 3, Tasks: []maintenance.TaskState{}})
	if want := "partitions          5 (1 need no compaction, 1 left to compact, 3 outside compact.where)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", b.String(), want)
	}
	b.Reset()
	writeHealth(&b, maintenance.Health{Table: "db.t", Partitions: 5, PartitionsToCompact: 1, Tasks: []maintenance.TaskState{}})
	if want := "partitions          5 (4 need no compaction, 1 left to compact)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", b.String(), want)
	}
}

// The maintainer's own connection to a SQLite catalog (the rows it reads,
// compaction's compare-and-set commit) waits for another connection's
// write lock too: a compare-and-set refused with SQLITE_BUSY would be a
// commit of unknown outcome, failing the run.
func TestSQLiteRowsSwapWaitsForAnotherWriter(t *testing.T) {
	ctx := t.Context()
	db, from := sqliteTable(t)
	rows := catalogRows(config.CatalogConfig{
		Name: "demo", Type: config.CatalogSQL, URI: "file:" + filepath.ToSlash(db),
		Props:    map[string]string{"sql.driver": sqliteshim.ShimName, "sql.dialect": "sqlite"},
		Requests: catalogcall.DefaultConfig(),
	}, slog.New(slog.DiscardHandler))
	if rows == nil {
		t.Fatal("no direct reader of the SQLite catalog's rows")
	}
	defer rows.Close()

	released := holdWriteLock(t, db, 500*time.Millisecond)
	ident := table.Identifier{"ns", "t"}
	ok, err := rows.SwapMetadataLocation(ctx, ident, from, from+".next")
	if err != nil || !ok {
		t.Fatalf("compare-and-set while another connection held the write lock: %v, %v", ok, err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if got, err := rows.MetadataLocation(ctx, ident); err != nil || got != from+".next" {
		t.Errorf("row at %q (%v) after the compare-and-set", got, err)
	}
}

// holdWriteLock takes the write lock of the SQLite database db on a
// connection of its own and releases it after d; the channel receives the
// release's error.
func holdWriteLock(t *testing.T, db string, d time.Duration) <-chan error {
	t.Helper()
	other, err := sql.Open(sqliteshim.ShimName, "file:"+filepath.ToSlash(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(d)
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		released <- errors.Join(err, conn.Close())
	}()
	return released
}

// sqliteTable creates a SQLite catalog "demo" holding the table ns.t and
// returns the database's path and the table's metadata location.
func sqliteTable(t *testing.T) (db, metadata string) {
	t.Helper()
	dir := t.TempDir()
	db = filepath.Join(dir, "catalog.db")
	gcat, err := gen.OpenSQLiteCatalog(t.Context(), "demo", db, filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	defer gcat.Close()
	tbl, err := gen.Create(t.Context(), gcat, gen.Options{Namespace: "ns", Table: "t", Appends: 1, RowsPerAppend: 10, Partitions: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl.MetadataLocation()
}
