package sqliteuri

import (
	"testing"
	"time"
)

func TestFile(t *testing.T) {
	for _, c := range []struct {
		uri, want string
		ok        bool
	}{
		{"file:/data/catalog.db", "/data/catalog.db", true},
		{"file:///data/catalog.db?_pragma=busy_timeout(5000)", "/data/catalog.db", true},
		{"/data/catalog.db", "/data/catalog.db", true},
		{"sql://file:/data/c.db?x=1", "/data/c.db", true},
		{":memory:", "", false},
		{"", "", false},
	} {
		got, ok := File(c.uri)
		if got != c.want || ok != c.ok {
			t.Errorf("File(%q) = %q, %v; want %q, %v", c.uri, got, ok, c.want, c.ok)
		}
	}
}

func TestWithBusyTimeout(t *testing.T) {
	for _, c := range []struct{ uri, driver, want string }{
		{"file:/d/c.db", "sqlite", "file:/d/c.db?_pragma=busy_timeout(30000)"},
		{"file:/d/c.db?_pragma=journal_mode(WAL)", "sqlite", "file:/d/c.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(30000)"},
		{"file:/d/c.db", "sqlite3", "file:/d/c.db?_busy_timeout=30000"},
		// The user's own timeout stands, in either syntax.
		{"file:/d/c.db?_pragma=busy_timeout(10)", "sqlite", "file:/d/c.db?_pragma=busy_timeout(10)"},
		{"file:/d/c.db?_busy_timeout=10", "sqlite3", "file:/d/c.db?_busy_timeout=10"},
	} {
		if got := WithBusyTimeout(c.uri, c.driver, 30*time.Second); got != c.want {
			t.Errorf("WithBusyTimeout(%q, %q) = %q; want %q", c.uri, c.driver, got, c.want)
		}
	}
}
