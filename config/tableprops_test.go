package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/maintenance"
)

const withOverrides = minimal + `defaults:
  compact:
    target_file_size: 128MiB
    trigger: {commit_count: 20}
  orphans:
    min_age: 7d
tables:
  - match: "db.*"
    expire:
      retain_last: 5
`

func settingOf(r Resolved, task, key string) (maintenance.Setting, bool) {
	for _, s := range r.Settings[task] {
		if s.Key == key {
			return s, true
		}
	}
	return maintenance.Setting{}, false
}

// A maintainer.* table property wins over every config layer, is parsed
// with the YAML's units, and is reported with its source.
func TestTablePropertyOverrides(t *testing.T) {
	c := mustParse(t, withOverrides, nil)
	r, err := c.ForTable("db.t", map[string]string{
		"maintainer.compact.enabled":                        "false",
		"maintainer.compact.target_file_size":               "256MiB",
		"maintainer.compact.trigger.interval":               "2d",
		"maintainer.expire.retain_last":                     " 20 ",
		"maintainer.orphans.max_run_time":                   "90m",
		"write.target-file-size-bytes":                      "1048576", // the config sets the target: not used
		"maintainer.compact.skip_partitions_written_within": "1w",
	})
	if err != nil || len(r.Invalid) > 0 || len(r.Warnings) > 0 {
		t.Fatalf("ForTable: %v, invalid %v, warnings %v", err, r.Invalid, r.Warnings)
	}
	if r.Compact.Enabled || r.Compact.TargetFileSize != 256<<20 || r.Compact.SkipPartitionsWrittenWithin != 7*24*time.Hour {
		t.Errorf("compact = %+v", r.Compact)
	}
	if tr := r.Triggers["compact"]; tr.Interval != 48*time.Hour || tr.CommitCount != 20 {
		t.Errorf("compact trigger = %+v; want interval 2d from the property, commit_count 20 from the config", tr)
	}
	if r.Expire.RetainLast != 20 || r.Limits["orphans"].MaxRunTime != 90*time.Minute || r.Orphans.MinAge != 7*24*time.Hour {
		t.Errorf("expire %+v, orphans limits %+v, orphans %+v", r.Expire, r.Limits["orphans"], r.Orphans)
	}
	for _, want := range []struct{ task, key, value, source string }{
		{"compact", "compact.enabled", "false", "table property maintainer.compact.enabled"},
		{"compact", "compact.target_file_size", "256MiB", "table property maintainer.compact.target_file_size"},
		{"compact", "compact.trigger.commit_count", "20", "config defaults"},
		{"compact", "compact.trigger.interval", "2d", "table property maintainer.compact.trigger.interval"},
		{"expire", "expire.retain_last", "20", "table property maintainer.expire.retain_last"},
		{"orphans", "orphans.min_age", "7d", "config defaults"},
		{"orphans", "orphans.max_run_time", "1h30m", "table property maintainer.orphans.max_run_time"},
	} {
		s, ok := settingOf(r, want.task, want.key)
		if !ok || s.Value != want.value || s.Source != want.source {
			t.Errorf("setting %s = %+v (found %v); want %s from %s", want.key, s, ok, want.value, want.source)
		}
	}
	if s, _ := settingOf(r, "compact", "compact.target_file_size"); s.Bytes == nil || *s.Bytes != 256<<20 {
		t.Errorf("target_file_size setting carries bytes %v; want %d", s.Bytes, 256<<20)
	}
	if _, ok := settingOf(r, "compact", "compact.min_input_files"); ok {
		t.Error("a value at its built-in default is listed as a setting")
	}
	// Another table without properties keeps the config's values.
	r, err = c.ForTable("db.u", nil)
	if err != nil || !r.Compact.Enabled || r.Compact.TargetFileSize != 128<<20 || r.Expire.RetainLast != 5 {
		t.Errorf("db.u: %+v %+v %v", r.Compact, r.Expire, err)
	}
	if s, _ := settingOf(r, "expire", "expire.retain_last"); s.Source != "config tables[0]" {
		t.Errorf("expire.retain_last source = %q; want config tables[0]", s.Source)
	}
}

// The fallback property is named as the source when the config is silent.
func TestTablePropertyFallbackSource(t *testing.T) {
	c := mustParse(t, minimal, nil)
	r, err := c.ForTable("db.t", map[string]string{"write.target-file-size-bytes": "67108864"})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := settingOf(r, "compact", "compact.target_file_size"); s.Source != "table property write.target-file-size-bytes" || s.Value != "64MiB" {
		t.Errorf("setting = %+v", s)
	}
}

// A property that does not parse, names no key, or asks for less than a
// safety floor fails only its task, with an error naming the property and
// the table; the task keeps the config's settings.
func TestTablePropertyRefused(t *testing.T) {
	c := mustParse(t, withOverrides, nil)
	for _, tc := range []struct {
		name  string
		props map[string]string
		task  string
		want  []string
	}{
		{"not a bool", map[string]string{"maintainer.compact.enabled": "flase"}, "compact",
			[]string{`maintainer.compact.enabled="flase"`, "must be true or false"}},
		{"bad unit", map[string]string{"maintainer.compact.target_file_size": "256MB/s"}, "compact",
			[]string{"maintainer.compact.target_file_size"}},
		{"below the orphans floor", map[string]string{"maintainer.orphans.min_age": "1h"}, "orphans",
			[]string{`maintainer.orphans.min_age="1h"`, "at least 24h"}},
		{"below the retain floor", map[string]string{"maintainer.expire.retain_last": "-1"}, "expire",
			[]string{`maintainer.expire.retain_last="-1"`, "must be at least 1"}},
		{"negative trigger", map[string]string{"maintainer.expire.trigger.commit_count": "-3"}, "expire",
			[]string{"maintainer.expire.trigger.commit_count", "must not be negative"}},
		{"misspelt key", map[string]string{"maintainer.compact.enable": "false"}, "compact",
			[]string{"maintainer.compact.enable", `did you mean "enabled"`}},
		{"a map", map[string]string{"maintainer.orphans.equal_schemes": "s3a=s3"}, "orphans",
			[]string{"maintainer.orphans.equal_schemes", "set it in the config"}},
		{"no env expansion", map[string]string{"maintainer.compact.max_run_time": "${HOME}"}, "compact",
			[]string{"maintainer.compact.max_run_time", "${HOME}"}},
		{"contradicts the config", map[string]string{"maintainer.compact.max_file_size": "64MiB"}, "compact",
			[]string{"maintainer.compact.max_file_size", "must not be below target_file_size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.ForTable("db.t", tc.props)
			if err != nil {
				t.Fatalf("ForTable: %v", err)
			}
			got := r.Invalid[tc.task]
			if got == nil || !errors.Is(got, ErrTableProperty) || len(r.Invalid) != 1 {
				t.Fatalf("Invalid = %v; want only %s with ErrTableProperty", r.Invalid, tc.task)
			}
			for _, w := range append(tc.want, "table db.t") {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("error %q lacks %q", got, w)
				}
			}
			// The task keeps what the config says.
			if !r.Compact.Enabled || r.Compact.TargetFileSize != 128<<20 || r.Orphans.MinAge != 7*24*time.Hour || r.Expire.RetainLast != 5 {
				t.Errorf("settings changed by a refused property: %+v %+v %+v", r.Compact, r.Orphans, r.Expire)
			}
		})
	}
}

// A property naming no task fails every task: it could be any one's
// opt-out.
func TestTablePropertyUnknownTask(t *testing.T) {
	c := mustParse(t, minimal, nil)
	r, err := c.ForTable("db.t", map[string]string{"maintainer.compaction.enabled": "false"})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"compact", "deletes", "manifests", "expire", "orphans"} {
		if e := r.Invalid[task]; e == nil || !strings.Contains(e.Error(), `names no task "compaction" (the tasks: compact, deletes, manifests, expire, orphans)`) {
			t.Errorf("Invalid[%s] = %v", task, e)
		}
	}
}

// Every registered task takes overrides through the same mechanism: a task
// added to the registry needs nothing more.
func TestTablePropertyEveryTask(t *testing.T) {
	c := mustParse(t, minimal, nil)
	for _, b := range TaskBlocks() {
		r, err := c.ForTable("db.t", map[string]string{"maintainer." + b.Key + ".enabled": "false"})
		if err != nil || r.Invalid[b.Key] != nil {
			t.Fatalf("%s: %v %v", b.Key, err, r.Invalid)
		}
		if s, ok := settingOf(r, b.Key, b.Key+".enabled"); !ok || s.Value != "false" {
			t.Errorf("%s: setting %+v", b.Key, s)
		}
	}
}

// A property that breaks a rule between two fields with a value the config
// set is refused, naming the property and the config's field.
func TestTablePropertyContradictsAnotherField(t *testing.T) {
	c := mustParse(t, minimal+"defaults:\n  compact:\n    min_file_size: 100MiB\n", nil)
	r, err := c.ForTable("db.t", map[string]string{"maintainer.compact.target_file_size": "64MiB"})
	if err != nil {
		t.Fatal(err)
	}
	want := `table db.t: table property refused: maintainer.compact.target_file_size="64MiB": with it, min_file_size must not exceed target_file_size (got 100MiB)`
	if e := r.Invalid["compact"]; e == nil || e.Error() != want {
		t.Errorf("Invalid = %v;\nwant %s", e, want)
	}
	if r.Compact.TargetFileSize != 0 || r.Compact.MinFileSize != 100<<20 {
		t.Errorf("compact = %+v; want the config's", r.Compact)
	}
}

// A maintainer property spelt with another case (Maintainer.compact.enabled,
// as some tools write keys) is refused, not ignored: the opt-out it holds
// would otherwise be lost and the task run. One naming a task fails that
// task; one naming none fails every task. A misspelt task is suggested.
func TestTablePropertyOtherCase(t *testing.T) {
	c := mustParse(t, minimal, nil)
	r, err := c.ForTable("db.t", map[string]string{"Maintainer.Compact.enabled": "false"})
	if err != nil {
		t.Fatal(err)
	}
	want := `Maintainer.Compact.enabled="false": property names are case-sensitive: write "maintainer.compact.enabled"`
	if e := r.Invalid["compact"]; e == nil || !errors.Is(e, ErrTableProperty) || !strings.Contains(e.Error(), want) {
		t.Errorf("Invalid[compact] = %v; want it to contain %s", e, want)
	}
	if e := r.Invalid["expire"]; e != nil {
		t.Errorf("Invalid[expire] = %v; the property names compact", e)
	}
	if !r.Compact.Enabled {
		t.Error("a refused property turned compaction off")
	}

	r, err = c.ForTable("db.t", map[string]string{"MAINTAINER.compaction.enabled": "false"})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"compact", "deletes", "manifests", "expire", "orphans"} {
		if e := r.Invalid[task]; e == nil || !strings.Contains(e.Error(), "property names are case-sensitive") {
			t.Errorf("Invalid[%s] = %v", task, e)
		}
	}

	r, err = c.ForTable("db.t", map[string]string{"maintainer.compaction.enabled": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if e := r.Invalid["compact"]; e == nil || !strings.Contains(e.Error(), `; did you mean "compact"?`) {
		t.Errorf("Invalid[compact] = %v; want a suggestion", e)
	}
}
