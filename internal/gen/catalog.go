// Package gen creates realistic Iceberg tables made of many small files. It
// is used by `maintainer demo`, by tests and by benchmarks.
//
// A generated table is a clickstream/event table (see [Schema]). Every append
// is a separate commit that adds exactly one Parquet data file (one per
// partition touched, and each append touches exactly one partition), so a
// table created with Appends=N has N snapshots and N data files.
package gen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

// OpenSQLiteCatalog creates (or opens) an iceberg-go SQL catalog named name,
// backed by the SQLite database file dbPath, whose default warehouse is the
// local directory whDir (tables go to whDir/<namespace>.db/<table>). Both
// directories are created when missing.
//
// The connection uses WAL, a busy timeout and immediate transactions so that
// several catalogs (e.g. a maintainer and a concurrent writer) may share the
// same database file. The catalog owns its database handle: Close releases it.
func OpenSQLiteCatalog(ctx context.Context, name, dbPath, whDir string) (*sqlcat.Catalog, error) {
	absDB, err := filepath.Abs(dbPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(absDB), 0o755); err != nil {
		return nil, err
	}
	return OpenSQLCatalog(ctx, name, sqliteshim.ShimName, sqlcat.SQLite, sqliteuri.DSN(absDB), whDir)
}

// OpenSQLCatalog creates (or opens) an iceberg-go SQL catalog named name on
// the database uri, reached through the database/sql driver and the SQL
// dialect given, whose default warehouse is the local directory whDir
// (created when missing). The catalog's own tables are created when the
// database has none. The catalog owns its database handle: Close releases it.
func OpenSQLCatalog(ctx context.Context, name, driver string, dialect sqlcat.SupportedDialect, uri, whDir string) (*sqlcat.Catalog, error) {
	if name == "" {
		return nil, errors.New("gen: catalog name is empty")
	}
	absWH, err := filepath.Abs(whDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(absWH, 0o755); err != nil {
		return nil, err
	}

	cat, err := catalog.Load(ctx, name, map[string]string{
		"type":                "sql",
		"uri":                 uri,
		sqlcat.DriverKey:      driver,
		sqlcat.DialectKey:     string(dialect),
		"warehouse":           FileURI(absWH),
		"init_catalog_tables": "true",
	})
	if err != nil {
		return nil, fmt.Errorf("gen: open %s catalog on %s: %w", dialect, databaseName(uri), err)
	}
	sc, ok := cat.(*sqlcat.Catalog)
	if !ok {
		if c, ok := cat.(catalog.Closer); ok {
			_ = c.Close()
		}

		return nil, fmt.Errorf("gen: unexpected catalog type %T", cat)
	}

	return sc, nil
}

// databaseName is uri for an error message: without its password and its
// connection parameters.
func databaseName(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "an unparsable database URI"
	}
	u.RawQuery = ""
	return u.Redacted()
}

// FileURI returns the file:// URI of an absolute local path, the form used for
// table and data file locations of the generated tables.
func FileURI(absPath string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(absPath)}).String()
}
