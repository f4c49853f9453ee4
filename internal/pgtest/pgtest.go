// Package pgtest gives tests a PostgreSQL database of their own on the
// server that scripts/test.sh starts (it exports MAINTAINER_TEST_POSTGRES_DSN),
// and iceberg-go SQL catalogs on it with a local warehouse, the way the
// maintainer reaches a PostgreSQL-backed catalog (driver pgx, dialect
// postgres).
//
// Only tests import this package.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver the catalogs use

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// EnvDSN names the PostgreSQL server the tests share: the URL of a database
// on it whose user may create databases.
const EnvDSN = "MAINTAINER_TEST_POSTGRES_DSN"

// Driver is the database/sql driver of a SQL catalog on PostgreSQL (the
// catalog property sql.driver); the maintainer binary registers it too.
const Driver = "pgx"

// adminTimeout bounds each CREATE and DROP DATABASE.
const adminTimeout = time.Minute

// ServerDSN returns $MAINTAINER_TEST_POSTGRES_DSN. Without it the test is
// skipped on a developer's machine, and fails where a server is required:
// under scripts/test.sh (MAINTAINER_REQUIRE_TOOLS=1) and in CI (CI=true).
func ServerDSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	msg := EnvDSN + " is not set (scripts/test.sh starts a PostgreSQL server and sets it)"
	if os.Getenv("MAINTAINER_REQUIRE_TOOLS") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("%s, and this run requires it (MAINTAINER_REQUIRE_TOOLS=1 or CI=true)", msg)
	}
	t.Skip(msg)
	return ""
}

// Database creates an empty database for the test alone and returns its
// URL; it is dropped when the test ends, with any connection still open to
// it.
func Database(t testing.TB) string {
	t.Helper()
	server := ServerDSN(t)
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvDSN, err)
	}
	name := databaseName(t)
	if err := admin(server, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s on %s: %v", name, u.Host, err)
	}
	t.Cleanup(func() {
		if err := admin(server, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s on %s: %v", name, u.Host, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// databaseName is the test's name made a PostgreSQL identifier, with a
// random suffix: unique among parallel tests and repeated runs, and short
// enough (PostgreSQL cuts names at 63 bytes).
func databaseName(t testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 40 {
		base = base[:40]
	}
	return "t_" + base + "_" + strings.ToLower(rand.Text()[:8])
}

// admin runs one statement on the server's own database (CREATE and DROP
// DATABASE cannot run inside a transaction, so not through database/sql's
// pool of the catalogs).
func admin(dsn, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, stmt)
	return err
}

// OpenCatalog opens an iceberg-go SQL catalog named name on the PostgreSQL
// database dsn (creating the catalog's tables when it has none), with its
// default warehouse in the local folder whDir. The caller closes it.
func OpenCatalog(ctx context.Context, name, dsn, whDir string) (*sqlcat.Catalog, error) {
	return gen.OpenSQLCatalog(ctx, name, Driver, sqlcat.Postgres, dsn, whDir)
}

// GeneratedTable creates a table of opt's small-file appends (internal/gen)
// in a SQL catalog on a fresh database (Database) whose warehouse is a
// temporary folder; the catalog is closed when the test ends. It returns
// the catalog, the table, the folder and the database's URL.
func GeneratedTable(t testing.TB, opt gen.Options) (*sqlcat.Catalog, *table.Table, string, string) {
	t.Helper()
	ctx := context.Background()
	dsn := Database(t)
	dir := t.TempDir()
	cat, err := OpenCatalog(ctx, "test", dsn, filepath.Join(dir, "wh"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	tbl, err := gen.Create(ctx, cat, opt)
	if err != nil {
		t.Fatal(fmt.Errorf("pgtest: generate %v: %w", opt.Identifier(), err))
	}
	return cat, tbl, dir, dsn
}
