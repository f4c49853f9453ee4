// Package sqlcatalog reads what an iceberg-go SQL catalog's own rows say
// without loading any table: a table's metadata location (to name the file
// of a table that cannot be loaded, and to decide whether it can overlap
// another table's location) and the catalog names that have tables (to say
// why a selection matched nothing). It also moves a table's row from one
// metadata file to the next by compare-and-set, the catalog's commit
// (internal/metacommit).
package sqlcatalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Rows queries the iceberg_tables rows of one catalog name through its own
// connection to the catalog database.
type Rows struct {
	db      *sql.DB
	catalog string
	// placeholder renders the n-th (1-based) bind parameter of the
	// dialect.
	placeholder func(n int) string
	// Timeout bounds each query (catalog.request_timeout), so a database
	// that stops answering fails the query instead of holding a pass; 0:
	// the caller's context alone.
	Timeout time.Duration
}

// bound is ctx with the query timeout.
func (r *Rows) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.Timeout)
}

// Open connects to the database of a SQL catalog with the driver and URI
// iceberg-go is given (the properties sql.driver and uri). Dialects whose
// bind parameters it does not know (mssql, oracle) return an error: callers
// then go on without what the rows say.
func Open(driver, dialect, uri, catalogName string) (*Rows, error) {
	var ph func(int) string
	switch strings.ToLower(dialect) {
	case "sqlite", "mysql":
		ph = func(int) string { return "?" }
	case "postgres":
		ph = func(n int) string { return fmt.Sprintf("$%d", n) }
	default:
		return nil, fmt.Errorf("sql dialect %q: catalog rows are not read for it", dialect)
	}
	db, err := sql.Open(driver, strings.TrimPrefix(uri, "sql://"))
	if err != nil {
		return nil, fmt.Errorf("open the %s catalog database: %w", dialect, err)
	}
	// One connection: the queries are rare and small.
	db.SetMaxOpenConns(1)
	return &Rows{db: db, catalog: catalogName, placeholder: ph}, nil
}

// Close closes the connection.
func (r *Rows) Close() error { return r.db.Close() }

// MetadataLocation is the metadata_location column of ident's row: the
// catalog's pointer to the table's current metadata file, read without
// reading that file. It is "" when the row has none or there is no row.
func (r *Rows) MetadataLocation(ctx context.Context, ident table.Identifier) (string, error) {
	if len(ident) < 2 {
		return "", nil
	}
	ns := ident[:len(ident)-1]
	q := fmt.Sprintf("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = %s AND table_name = %s AND table_namespace IN (%s, %s)",
		r.placeholder(1), r.placeholder(2), r.placeholder(3), r.placeholder(4))
	ctx, cancel := r.bound(ctx)
	defer cancel()
	var loc sql.NullString
	err := r.db.QueryRowContext(ctx, q, r.catalog, ident[len(ident)-1], strings.Join(ns, "."), encodedNamespace(ns)).Scan(&loc)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the metadata location of %s from iceberg_tables: %w", strings.Join(ident, "."), err)
	}
	return loc.String, nil
}

// SwapMetadataLocation points ident's row at the metadata file to if, and
// only if, it points at from now, as iceberg-go's SQL catalog commits (the
// previous location becomes from). It reports whether the row moved: false
// means another commit moved it first (or the table is gone), and nothing
// changed. An error leaves the outcome unknown: the statement may have
// been applied before the answer was lost.
func (r *Rows) SwapMetadataLocation(ctx context.Context, ident table.Identifier, from, to string) (bool, error) {
	if len(ident) < 2 {
		return false, fmt.Errorf("swap the metadata location of %q: not a table identifier", strings.Join(ident, "."))
	}
	ns := ident[:len(ident)-1]
	q := fmt.Sprintf("UPDATE iceberg_tables SET metadata_location = %s, previous_metadata_location = %s "+
		"WHERE catalog_name = %s AND table_name = %s AND table_namespace IN (%s, %s) AND metadata_location = %s",
		r.placeholder(1), r.placeholder(2), r.placeholder(3), r.placeholder(4), r.placeholder(5), r.placeholder(6), r.placeholder(7))
	ctx, cancel := r.bound(ctx)
	defer cancel()
	res, err := r.db.ExecContext(ctx, q, to, from, r.catalog, ident[len(ident)-1], strings.Join(ns, "."), encodedNamespace(ns), from)
	if err != nil {
		return false, fmt.Errorf("swap the metadata location of %s in iceberg_tables from %s to %s: %w", strings.Join(ident, "."), from, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("swap the metadata location of %s in iceberg_tables from %s to %s: rows affected: %w", strings.Join(ident, "."), from, to, err)
	}
	if n > 1 {
		// Both namespace keys held the table with the same file: the
		// catalog's rows are inconsistent, and the commit is not trusted.
		return false, fmt.Errorf("swap the metadata location of %s in iceberg_tables moved %d rows, not one", strings.Join(ident, "."), n)
	}
	return n == 1, nil
}

// CatalogNames are the distinct catalog names that have rows in
// iceberg_tables, sorted.
func (r *Rows) CatalogNames(ctx context.Context) ([]string, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	rows, err := r.db.QueryContext(ctx, "SELECT DISTINCT catalog_name FROM iceberg_tables ORDER BY catalog_name")
	if err != nil {
		return nil, fmt.Errorf("list the catalog names of iceberg_tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list the catalog names of iceberg_tables: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the catalog names of iceberg_tables: %w", err)
	}
	return out, nil
}

// encodedNamespace is the key iceberg-go's SQL catalog stores for a
// namespace whose dotted form would be ambiguous (a level holding a dot):
// its marker and the levels as a JSON array. Simple namespaces are stored
// dotted, so a row matches one of the two keys.
func encodedNamespace(ns table.Identifier) string {
	b, err := json.Marshal([]string(ns))
	if err != nil {
		return ""
	}
	return "__iceberg_namespace_v1__:" + string(b)
}
