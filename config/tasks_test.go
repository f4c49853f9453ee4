package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// demoConfig is a test-only component's Config: its yaml tags are its only
// declaration of the keys.
type demoConfig struct {
	Enabled bool          `yaml:"enabled"`
	Depth   int           `yaml:"depth"`
	Budget  int64         `yaml:"budget,size"`
	Every   time.Duration `yaml:"every"`
	Labels  []string      `yaml:"labels"`
}

func (c demoConfig) Validate() error {
	var v validate.Collector
	if c.Depth > 10 {
		v.Add("depth", c.Depth, "must be at most 10")
	}
	if c.Budget > 0 && c.Budget < 1<<20 {
		v.Add("budget", c.Budget, "must be at least 1MiB")
	}
	return v.Err()
}

// withDemo is the task registry plus the test-only task "demo"; resolved
// receives what ForTable stores for it.
func withDemo(resolved *demoConfig) []task {
	demo := newTask("demo", func() demoConfig { return demoConfig{Enabled: true, Depth: 1} }, demoConfig.Validate,
		func(_ *Resolved, c demoConfig) { *resolved = c },
		trigger.Config{Interval: time.Hour})
	return append(slices.Clone(tasks), demo)
}

func demoProblems(t *testing.T, src string, registry []task) []string {
	t.Helper()
	_, err := parse("maintainer.yaml", []byte(src), mapEnv(nil), registry)
	if err == nil {
		t.Fatalf("parse succeeded; want problems")
	}
	return strings.Split(err.Error(), "\n")
}

// A key declared on a component's Config is accepted under defaults and
// tables[] with no other declaration, resolves through the layers like the
// built-in tasks' keys, and a misspelt or out-of-range key is reported at
// its position.
func TestTaskKeysComeFromTheComponentConfig(t *testing.T) {
	var got demoConfig
	registry := withDemo(&got)
	src := minimal + `defaults:
  demo:
    depth: 3
    budget: 1GiB
    labels: [a, b]
tables:
  - match: db.*
    demo: {every: 2d, trigger: {commit_count: 5}}
  - match: db.x
    demo: {enabled: false, labels: []}
`
	c, err := parse("maintainer.yaml", []byte(src), mapEnv(nil), registry)
	if err != nil {
		t.Fatal(err)
	}
	for ident, want := range map[string]demoConfig{
		"db.t": {Enabled: true, Depth: 3, Budget: 1 << 30, Every: 48 * time.Hour, Labels: []string{"a", "b"}},
		"db.x": {Enabled: false, Depth: 3, Budget: 1 << 30, Every: 48 * time.Hour, Labels: []string{}},
		"x.y":  {Enabled: true, Depth: 3, Budget: 1 << 30, Labels: []string{"a", "b"}},
	} {
		r, err := c.ForTable(ident, nil)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ForTable(%q) demo = %+v, %v; want %+v", ident, got, err, want)
		}
		wantTrigger := trigger.Config{Interval: time.Hour}
		if ident != "x.y" {
			wantTrigger.CommitCount = 5
		}
		if r.Triggers["demo"] != wantTrigger {
			t.Errorf("ForTable(%q) demo trigger = %+v; want %+v", ident, r.Triggers["demo"], wantTrigger)
		}
	}

	for _, tc := range []struct{ src, want string }{
		{"defaults:\n  demo:\n    dpeth: 4\n", `maintainer.yaml:7:5: defaults.demo.dpeth: unknown key (did you mean "depth"?)`},
		{"tables:\n  - match: db.*\n    demo: {budget: 1KiB}\n", `maintainer.yaml:7:12: tables[0].demo.budget: must be at least 1MiB (got 1KiB)`},
		{"tables:\n  - match: db.*\n    demo:\n      depth: 11\n", `maintainer.yaml:8:7: tables[0].demo.depth: must be at most 10 (got 11)`},
		{"defaults:\n  demo: {budget: lots}\n", `maintainer.yaml:6:10: defaults.demo.budget: invalid size "lots": expected a number, optionally followed by a unit (B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)`},
	} {
		if got := demoProblems(t, minimal+tc.src, registry); len(got) != 1 || got[0] != tc.want {
			t.Errorf("problems of\n%s= %q\nwant %q", tc.src, got, tc.want)
		}
	}

	// Without the registry entry, the block is an unknown key.
	want := `maintainer.yaml:6:3: defaults.demo: unknown key (allowed: compact, deletes, manifests, expire, orphans)`
	if got := demoProblems(t, minimal+"defaults:\n  demo: {depth: 3}\n", tasks); len(got) != 1 || got[0] != want {
		t.Errorf("demo without its registry entry: %q; want %q", got, want)
	}
}

// A Config built by hand, not by Parse, resolves the built-in tasks' defaults.
func TestForTableOfAConfigNotParsed(t *testing.T) {
	r, err := (&Config{}).ForTable("db.t", nil)
	if err != nil || !reflect.DeepEqual(r.Compact, compact.DefaultConfig()) || r.Triggers["orphans"] != (trigger.Config{Interval: 24 * time.Hour, RateLimit: time.Hour}) {
		t.Errorf("ForTable = %+v, %v", r, err)
	}
}

// A task added to maintenance's registry without a config block (or the other
// way round) would run with zero settings or never run: the two lists must
// name the same tasks in the same order.
func TestTaskBlocksFollowTheTaskRegistry(t *testing.T) {
	var keys []string
	for _, b := range TaskBlocks() {
		keys = append(keys, b.Key)
	}
	if want := maintenance.TaskNames(); !slices.Equal(keys, want) {
		t.Fatalf("config task blocks %v, maintenance tasks %v: every task needs its block, in run order", keys, want)
	}
}

// A key written with no value sets nothing (as the mirror structs' nil
// pointers did), so the defaults stay: an empty equal_schemes must not
// drop the built-in s3a/s3n -> s3 equivalences, which would make orphan
// removal see live s3a:// files as strangers. "{}" clears them on purpose.
func TestKeyWithoutValueSetsNothing(t *testing.T) {
	defaults := orphans.DefaultConfig().EqualSchemes
	if len(defaults) == 0 {
		t.Fatal("orphans.DefaultConfig has no equal_schemes to keep")
	}
	for _, tc := range []struct {
		name, yaml string
		want       map[string]string
	}{
		{"defaults, no value", "defaults:\n  orphans:\n    equal_schemes:\n", defaults},
		{"tables entry, no value", "tables:\n  - match: \"**\"\n    orphans:\n      equal_schemes:\n", defaults},
		{"defaults, empty map", "defaults:\n  orphans:\n    equal_schemes: {}\n", map[string]string{}},
		{"tables entry over defaults, no value", "defaults:\n  orphans:\n    equal_schemes: {gs: s3}\ntables:\n  - match: \"**\"\n    orphans:\n      equal_schemes:\n", map[string]string{"gs": "s3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, minimal+tc.yaml, nil)
			r, err := c.ForTable("db.t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(r.Orphans.EqualSchemes, tc.want) || (r.Orphans.EqualSchemes == nil) != (tc.want == nil) {
				t.Errorf("equal_schemes = %v; want %v", r.Orphans.EqualSchemes, tc.want)
			}
		})
	}
}
