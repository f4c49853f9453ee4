package main

// The maintainer on a SQL catalog on PostgreSQL (driver pgx, dialect
// postgres; scripts/test.sh starts the server), as on SQLite: a run of the
// three tasks, two maintainers contending for one table, and an unreachable
// or empty catalog.

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/jackc/pgx/v5"

	"github.com/iceberg-maintainer/maintainer/internal/pgtest"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
)

// postgresCatalog is the demo's catalog moved to a fresh PostgreSQL
// database of the test's own; the warehouse stays in dir/warehouse.
func postgresCatalog(t *testing.T, dir string) (openCatalogFunc, string) {
	t.Helper()
	dsn := pgtest.Database(t)
	open := func(ctx context.Context) (*sqlcat.Catalog, error) {
		return pgtest.OpenCatalog(ctx, genCatalog, dsn, filepath.Join(dir, "warehouse"))
	}
	_, cfg := sqliteCatalog(t, dir)
	return open, postgresConfig(t, cfg, dsn)
}

// postgresConfig is the demo's config cfg with its catalog on the
// PostgreSQL database dsn.
func postgresConfig(t *testing.T, cfg, dsn string) string {
	t.Helper()
	for _, r := range []struct{ old, new string }{
		{`uri: "file:` + sqliteURIPath(t, cfg) + `"`, `uri: "` + dsn + `"`},
		{"sql.driver: sqliteshim", "sql.driver: " + pgtest.Driver},
		{"sql.dialect: sqlite", "sql.dialect: " + string(sqlcat.Postgres)},
	} {
		replaced := strings.Replace(cfg, r.old, r.new, 1)
		if replaced == cfg {
			t.Fatalf("the demo's config has no %q to replace:\n%s", r.old, cfg)
		}
		cfg = replaced
	}
	return cfg
}

// sqliteURIPath is the path of the demo config's SQLite catalog.
func sqliteURIPath(t *testing.T, cfg string) string {
	t.Helper()
	const key = `uri: "file:`
	i := strings.Index(cfg, key)
	if i < 0 {
		t.Fatalf("the demo's config has no SQLite catalog uri:\n%s", cfg)
	}
	rest := cfg[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestRunAllTasksPostgres(t *testing.T) {
	t.Parallel()
	testRunAllTasks(t, postgresCatalog)
}

// TestTwoMaintainersOneRedisPostgres is TestTwoMaintainersOneRedis on a
// catalog on PostgreSQL.
func TestTwoMaintainersOneRedisPostgres(t *testing.T) {
	t.Parallel()
	testTwoMaintainersOneRedis(t, postgresCatalog)
}

// A catalog on PostgreSQL that cannot be reached (nothing listening, a wrong
// password), or a database without the catalog's tables (a typo in the
// database name), is unreachable: exit 3, no table worked on, nothing
// created, and the password is not printed.
func TestPostgresCatalogUnreachableExit3(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-"+password)
	closedPort := *u
	closedPort.Host = redistest.ClosedAddr(t)

	dir := t.TempDir()
	_, demo := sqliteCatalog(t, dir)
	cases := []struct {
		name, dsn string
		stderr    []string
	}{
		{"nothing listening", closedPort.String(), []string{"sql catalog", closedPort.Host}},
		{"wrong password", wrongPassword.String(), []string{"sql catalog", "password authentication failed"}},
		{"database without a catalog", dsn, []string{"list namespaces", `relation "iceberg_tables" does not exist`}},
	}
	noPassword := func(t *testing.T, r result) {
		if strings.Contains(r.stderr, password) {
			t.Errorf("stderr shows the password:\n%s", r.stderr)
		}
	}
	for i, c := range cases {
		cfg := writeFile(t, filepath.Join(dir, fmt.Sprintf("c%d.yaml", i)), postgresConfig(t, demo, c.dsn))
		expectUnreachable(t, dir, c.name, cfg, c.stderr, noPassword)
	}

	// The maintainer only maintains existing catalogs: it created no table.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the maintainer created %d tables in an empty database", tables)
	}
}
