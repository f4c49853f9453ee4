package main

import (
	"database/sql"
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
	dir := t.TempDir()
	db := filepath.Join(dir, "catalog.db")
	gcat, err := gen.OpenSQLiteCatalog(ctx, "demo", db, filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Create(ctx, gcat, gen.Options{Namespace: "ns", Table: "t", Appends: 1, RowsPerAppend: 10, Partitions: 1, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	gcat.Close()

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
	other, err := sql.Open(sqliteshim.ShimName, "file:"+filepath.ToSlash(db))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, err := conn.ExecContext(ctx, "ROLLBACK")
		released <- err
	}()

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
