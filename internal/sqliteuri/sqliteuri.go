// Package sqliteuri reads and completes the connection URIs of SQLite
// catalogs, for the drivers that sqliteshim may select.
package sqliteuri

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/uptrace/bun/driver/sqliteshim"
)

// BusyTimeout is how long a connection waits for another connection's write
// lock before failing with SQLITE_BUSY. Without one, two tables committing at
// once through the same catalog database (run --parallel, serve) or a writer
// committing while the maintainer does, fail at once.
const BusyTimeout = 30 * time.Second

// File is the database file of a SQLite URI such as
// file:/data/catalog.db?_pragma=... or a plain path; false for an in-memory
// database.
func File(uri string) (string, bool) {
	uri = strings.TrimPrefix(uri, "sql://")
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	uri = strings.TrimPrefix(strings.TrimPrefix(uri, "file://"), "file:")
	if uri == "" || uri == ":memory:" {
		return "", false
	}
	return uri, true
}

// WithBusyTimeout returns uri with a busy timeout of d added, in the syntax
// of the driver that the catalog property sql.driver names, unless the URI
// already sets one (the user's choice stands).
func WithBusyTimeout(uri, driver string, d time.Duration) string {
	if strings.Contains(strings.ToLower(uri), "busy_timeout") {
		return uri
	}
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	return uri + sep + busyParam(driver, d)
}

// DSN is the URI of the database file path for a catalog that shares the
// file with other processes: WAL, a busy timeout and immediate transactions.
func DSN(path string) string {
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
	if isMattn(sqliteshim.ShimName) {
		return u + "?_journal_mode=WAL&_txlock=immediate&" + busyParam(sqliteshim.ShimName, BusyTimeout)
	}
	return u + "?_pragma=journal_mode(WAL)&_txlock=immediate&" + busyParam(sqliteshim.ShimName, BusyTimeout)
}

func busyParam(driver string, d time.Duration) string {
	if isMattn(driver) {
		return fmt.Sprintf("_busy_timeout=%d", d.Milliseconds())
	}
	return fmt.Sprintf("_pragma=busy_timeout(%d)", d.Milliseconds())
}

// isMattn tells whether driver is (or the shim resolves to)
// github.com/mattn/go-sqlite3; the other is modernc.org/sqlite.
func isMattn(driver string) bool {
	if driver == sqliteshim.ShimName {
		driver = sqliteshim.DriverName()
	}
	return driver == "sqlite3"
}
