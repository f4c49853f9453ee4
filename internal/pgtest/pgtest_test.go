package pgtest

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// databaseExists asks the server whether database name exists.
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, ServerDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func dbOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// Each test gets a database of its own, empty, and dropped when the test
// ends even with a connection still open to it.
func TestPostgresDatabasePerTest(t *testing.T) {
	var first, second string
	t.Run("a/b", func(t *testing.T) {
		first = Database(t)
		second = Database(t)
		if first == second {
			t.Fatalf("two databases with one URL %s", first)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, first)
		if err != nil {
			t.Fatalf("connect to the test's database: %v", err)
		}
		// Left open on purpose: the drop must not wait for it.
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		var tables int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("a new database has %d tables", tables)
		}
		for _, dsn := range []string{first, second} {
			if name := dbOf(t, dsn); !databaseExists(t, name) || !strings.HasPrefix(name, "t_testpostgresdatabasepertest_a_b_") {
				t.Errorf("database %q: exists %v", name, databaseExists(t, name))
			}
		}
	})
	for _, dsn := range []string{first, second} {
		if name := dbOf(t, dsn); databaseExists(t, name) {
			t.Errorf("database %s outlived its test", name)
		}
	}
}

// A generated table in a catalog on PostgreSQL is seen, with the same rows,
// through a second catalog on the same database, and a commit through one
// is seen by the other: what a maintainer beside a writer relies on.
func TestPostgresGeneratedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := gen.Options{Namespace: "db", Table: "events", Appends: 6, RowsPerAppend: 50, Partitions: 2, Seed: 7}
	_, tbl, dir, dsn := GeneratedTable(t, opt)
	rows, sum, err := gen.Checksum(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 300 || len(tbl.Metadata().Snapshots()) != 6 {
		t.Fatalf("generated %d rows in %d snapshots; want 300 in 6", rows, len(tbl.Metadata().Snapshots()))
	}
	if want := gen.FileURI(filepath.Join(dir, "wh", "db.db", "events")); tbl.Location() != want {
		t.Errorf("table location %s; want %s", tbl.Location(), want)
	}

	other, err := OpenCatalog(ctx, "test", dsn, filepath.Join(dir, "wh"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	seen, err := other.LoadTable(ctx, table.Identifier{"db", "events"})
	if err != nil {
		t.Fatal(err)
	}
	if r, s, err := gen.Checksum(ctx, seen); err != nil || r != rows || s != sum {
		t.Fatalf("through a second catalog: %d rows, checksum %x, %v; want %d, %x", r, s, err, rows, sum)
	}
	if _, err := gen.Append(ctx, seen, opt, 1, gen.NextAppendIndex(seen)); err != nil {
		t.Fatalf("append through the second catalog: %v", err)
	}
	// tbl is now stale: its commit must conflict in the catalog and be
	// retried on the refreshed table (gen.Append does that), never replace
	// the other catalog's commit.
	if _, err := gen.Append(ctx, tbl, opt, 1, gen.NextAppendIndex(seen)+1); err != nil {
		t.Fatalf("append through the first catalog: %v", err)
	}
	final, err := other.LoadTable(ctx, table.Identifier{"db", "events"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, err := gen.Checksum(ctx, final); err != nil || r != 400 || len(final.Metadata().Snapshots()) != 8 {
		t.Errorf("after an append through each catalog: %d rows in %d snapshots (%v); want 400 in 8", r, len(final.Metadata().Snapshots()), err)
	}
}
