package config

import (
	"slices"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

// The catalog's request limits default when left out and are read when set.
func TestCatalogRequestLimits(t *testing.T) {
	if got := mustParse(t, minimal, nil).Catalog.Requests; got != catalogcall.DefaultConfig() {
		t.Errorf("defaults: %+v; want %+v", got, catalogcall.DefaultConfig())
	}
	src := minimal + "  request_timeout: 5s\n  max_attempts: 1\n"
	want := catalogcall.Config{RequestTimeout: 5 * time.Second, MaxAttempts: 1}
	if got := mustParse(t, src, nil).Catalog.Requests; got != want {
		t.Errorf("set: %+v; want %+v", got, want)
	}
}

func expectProblems(t *testing.T, src string, want ...string) {
	t.Helper()
	if got := problemsOf(t, src, nil); !slices.Equal(got, want) {
		t.Errorf("problems:\n%q\nwant\n%q", got, want)
	}
}

// max_run_time sits in every task block, defaults per task, and resolves
// through defaults and overrides like the task's own keys.
func TestMaxRunTimeResolves(t *testing.T) {
	src := minimal + `defaults:
  expire:
    max_run_time: 30m
tables:
  - match: db.big
    compact: {max_run_time: 8h}
`
	c := mustParse(t, src, nil)
	r, err := c.ForTable("db.big", nil)
	if err != nil {
		t.Fatal(err)
	}
	def := maintenance.DefaultTaskLimits().MaxRunTime
	want := map[string]time.Duration{"compact": 8 * time.Hour, "expire": 30 * time.Minute, "orphans": def}
	for task, d := range want {
		if got := r.Limits[task].MaxRunTime; got != d {
			t.Errorf("db.big %s max_run_time = %s; want %s", task, got, d)
		}
	}
	other, err := c.ForTable("db.small", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := other.Limits["compact"].MaxRunTime; got != def {
		t.Errorf("db.small compact max_run_time = %s; want the default %s", got, def)
	}
}

// Limits that could never let anything run are refused at their keys.
func TestLimitsRefused(t *testing.T) {
	expectProblems(t, minimal+"  request_timeout: 0s\n  max_attempts: 0\n",
		"maintainer.yaml:5:3: catalog.request_timeout: must be > 0 (got 0s)",
		"maintainer.yaml:6:3: catalog.max_attempts: must be at least 1 (got 0)")
	expectProblems(t, minimal+"defaults: {compact: {max_run_time: 0s}}\ntables: [{match: db.x, orphans: {max_run_time: -1h}}]\n",
		"maintainer.yaml:5:22: defaults.compact.max_run_time: must be > 0 (got 0s)",
		"maintainer.yaml:6:34: tables[0].orphans.max_run_time: must be > 0 (got -1h0m0s)")
}
