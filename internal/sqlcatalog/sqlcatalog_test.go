package sqlcatalog

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/pgtest"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

func TestRowsSQLite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "catalog.db")
	cat, err := gen.OpenSQLiteCatalog(t.Context(), "prod", db, filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	testRows(t, cat, sqliteshim.ShimName, "sqlite", sqliteuri.DSN(db))
}

func TestRowsPostgres(t *testing.T) {
	dsn := pgtest.Database(t)
	cat, err := pgtest.OpenCatalog(t.Context(), "prod", dsn, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	testRows(t, cat, pgtest.Driver, "postgres", dsn)
}

// testRows: the rows give a table's metadata location (also for a
// namespace stored in iceberg-go's encoded form) without loading it, "" for
// a table that does not exist, and the catalog names that have tables.
// copyFile copies a local metadata file named by its file:// URL.
func copyFile(from, to string) error {
	src, err := url.Parse(from)
	if err != nil {
		return err
	}
	dst, err := url.Parse(to)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src.Path)
	if err != nil {
		return err
	}
	return os.WriteFile(dst.Path, b, 0o644)
}

func testRows(t *testing.T, cat *sqlcat.Catalog, driver, dialect, uri string) {
	ctx := t.Context()
	var want []string
	for _, ns := range []table.Identifier{{"db"}, {"a.b", "c"}} {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
		tbl, err := cat.CreateTable(ctx, append(slices.Clone(ns), "t"), gen.Schema())
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tbl.MetadataLocation())
	}

	rows, err := Open(driver, dialect, uri, "prod")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for i, ident := range []table.Identifier{{"db", "t"}, {"a.b", "c", "t"}} {
		got, err := rows.MetadataLocation(ctx, ident)
		if err != nil || got != want[i] {
			t.Errorf("%v: %q, %v; want %q", ident, got, err, want[i])
		}
	}
	if got, err := rows.MetadataLocation(ctx, table.Identifier{"db", "none"}); err != nil || got != "" {
		t.Errorf("a table that does not exist: %q, %v; want \"\"", got, err)
	}
	// The swap moves a row only from the file it points at now, and
	// iceberg-go's catalog then loads the table from the new one.
	next := strings.Replace(want[1], "00000-", "00001-", 1)
	if err := copyFile(want[1], next); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"a.b", "c", "t"}
	if ok, err := rows.SwapMetadataLocation(ctx, ident, next, want[1]); err != nil || ok {
		t.Errorf("swap from a file the row does not point at: %v, %v; want false, nil", ok, err)
	}
	if got, _ := rows.MetadataLocation(ctx, ident); got != want[1] {
		t.Errorf("a refused swap moved the row to %q", got)
	}
	if ok, err := rows.SwapMetadataLocation(ctx, ident, want[1], next); err != nil || !ok {
		t.Errorf("swap from the current file: %v, %v; want true, nil", ok, err)
	}
	if got, _ := rows.MetadataLocation(ctx, ident); got != next {
		t.Errorf("after the swap the row points at %q, want %q", got, next)
	}
	if tbl, err := cat.LoadTable(ctx, ident); err != nil || tbl.MetadataLocation() != next {
		t.Errorf("iceberg-go loads the swapped table from %v (%v), want %q", tbl, err, next)
	}
	if got, _ := rows.MetadataLocation(ctx, table.Identifier{"db", "t"}); got != want[0] {
		t.Errorf("the swap moved another table's row to %q", got)
	}
	if ok, err := rows.SwapMetadataLocation(ctx, table.Identifier{"db", "none"}, want[0], next); err != nil || ok {
		t.Errorf("swap of a table that does not exist: %v, %v; want false, nil", ok, err)
	}
	names, err := rows.CatalogNames(ctx)
	if err != nil || !slices.Equal(names, []string{"prod"}) {
		t.Errorf("catalog names %v, %v; want [prod]", names, err)
	}
	// A query that cannot finish within Timeout fails rather than holding
	// the pass (catalog.request_timeout).
	rows.Timeout = time.Nanosecond
	if _, err := rows.MetadataLocation(ctx, table.Identifier{"db", "t"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("metadata location past the timeout: %v, want a deadline error", err)
	}
	if _, err := rows.CatalogNames(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("catalog names past the timeout: %v, want a deadline error", err)
	}
	if _, err := rows.SwapMetadataLocation(ctx, ident, next, want[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("swap past the timeout: %v, want a deadline error", err)
	}
	rows.Timeout = 0
	if _, err := Open("x", "oracle", "", "prod"); err == nil {
		t.Error("an unknown dialect opened")
	}
}
