package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// TaskSet holds the settings of each task, as written in defaults or in one
// tables[] override. A nil block, like a nil field in a block, is "not set".
//
// Adding a task (expire, orphans) takes: a settings struct with one pointer
// field per field of the component's Config (same Go name, snake_case yaml
// tag equal to the component's FieldError.Field), a field here, a field in
// Resolved, and one entry in the tasks table below.
type TaskSet struct {
	Compact *CompactSettings `yaml:"compact"`
	Expire  *ExpireSettings  `yaml:"expire"`
	Orphans *OrphansSettings `yaml:"orphans"`
}

// TableOverride is one entry of tables: settings applied on top of defaults
// (and of earlier matching overrides) to the tables Match matches.
type TableOverride struct {
	Match   string `yaml:"match"` // glob over "ns1.ns2.table", see MatchGlob
	TaskSet `yaml:",inline"`
}

// CompactSettings is a partial compact.Config: each non-nil field replaces
// the field of the same name.
type CompactSettings struct {
	Enabled                     *bool     `yaml:"enabled"`
	TargetFileSize              *Size     `yaml:"target_file_size"`
	MinFileSize                 *Size     `yaml:"min_file_size"`
	MaxFileSize                 *Size     `yaml:"max_file_size"`
	MinInputFiles               *int      `yaml:"min_input_files"`
	DeleteFileThreshold         *int      `yaml:"delete_file_threshold"`
	DeleteRatioThreshold        *float64  `yaml:"delete_ratio_threshold"`
	Where                       *string   `yaml:"where"`
	SkipPartitionsWrittenWithin *Duration `yaml:"skip_partitions_written_within"`
	MaxBytesPerRun              *Size     `yaml:"max_bytes_per_run"`
	MaxConcurrentGroups         *int      `yaml:"max_concurrent_groups"`
	PartialProgress             *bool     `yaml:"partial_progress"`
	MaxCommits                  *int      `yaml:"max_commits"`
	CommitRetries               *int      `yaml:"commit_retries"`
	RemoveDeadDeletes           *bool     `yaml:"remove_dead_deletes"`
	// Trigger says when the task is due; see TriggerSettings.
	Trigger *TriggerSettings `yaml:"trigger"`
}

// ExpireSettings is a partial expire.Config.
type ExpireSettings struct {
	Enabled           *bool     `yaml:"enabled"`
	RetainLast        *int      `yaml:"retain_last"`
	MaxSnapshotAge    *Duration `yaml:"max_snapshot_age"`
	MaxRefAge         *Duration `yaml:"max_ref_age"`
	DeleteConcurrency *int      `yaml:"delete_concurrency"`
	CommitRetries     *int      `yaml:"commit_retries"`
	// Trigger says when the task is due; see TriggerSettings.
	Trigger *TriggerSettings `yaml:"trigger"`
}

// OrphansSettings is a partial orphans.Config.
type OrphansSettings struct {
	Enabled           *bool              `yaml:"enabled"`
	MinAge            *Duration          `yaml:"min_age"`
	EqualSchemes      *map[string]string `yaml:"equal_schemes"`
	EqualAuthorities  *map[string]string `yaml:"equal_authorities"`
	PrefixMismatch    *string            `yaml:"prefix_mismatch"`
	Location          *string            `yaml:"location"`
	ListConcurrency   *int               `yaml:"list_concurrency"`
	DeleteConcurrency *int               `yaml:"delete_concurrency"`
	// Trigger says when the task is due; see TriggerSettings.
	Trigger *TriggerSettings `yaml:"trigger"`
}

// TriggerSettings is a partial trigger.Config: when a task is due. Each
// field is merged on its own, so an override may change one threshold and
// keep the others.
type TriggerSettings struct {
	CommitCount     *int      `yaml:"commit_count"`
	DataFileCount   *int      `yaml:"data_file_count"`
	DataFileBytes   *Size     `yaml:"data_file_bytes"`
	DeleteFileCount *int      `yaml:"delete_file_count"`
	Interval        *Duration `yaml:"interval"`
	RateLimit       *Duration `yaml:"rate_limit"`
}

// Default triggers: Flink-like thresholds that keep a busy table healthy, an
// interval that catches a table whose writers stopped just short of them, and
// a rate limit so a fast streaming writer does not keep compaction running
// back to back. A task never run on a table is due at once (the interval has
// never elapsed), so a fresh CronJob run does the work.
func defaultTrigger(task string) trigger.Config {
	switch task {
	case "compact":
		return trigger.Config{CommitCount: 10, Interval: 24 * time.Hour, RateLimit: 10 * time.Minute}
	case "expire":
		return trigger.Config{CommitCount: 50, Interval: 6 * time.Hour, RateLimit: 10 * time.Minute}
	case "orphans": // listing the table location is the expensive part
		return trigger.Config{Interval: 24 * time.Hour, RateLimit: time.Hour}
	}
	panic("config: no default trigger for task " + task)
}

// Resolved is the effective configuration of one table.
type Resolved struct {
	Compact compact.Config
	Expire  expire.Config
	Orphans orphans.Config
	// Triggers by task name (compact, expire, orphans).
	Triggers map[string]trigger.Config
	// Warnings name table properties that were ignored because they do not
	// parse or are out of range; the caller logs them.
	Warnings []string
}

// PropTargetFileSize is the table property used for target_file_size when
// the config does not set it for the table.
const PropTargetFileSize = "write.target-file-size-bytes"

// taskSpec ties a task block to its component's Config.
type taskSpec struct {
	key      string                      // the block's YAML key
	block    func(TaskSet) reflect.Value // the settings pointer, maybe nil
	defaults func() reflect.Value        // pointer to a fresh DefaultConfig()
	validate func(reflect.Value) []fieldProblem
	store    func(*Resolved, reflect.Value)
	// fallbacks fill fields from table properties when no block sets them.
	fallbacks []propFallback
}

type propFallback struct {
	prop  string
	field string // YAML key of the settings field
	parse func(string) (any, error)
}

var tasks = []taskSpec{{
	key:   "compact",
	block: func(ts TaskSet) reflect.Value { return reflect.ValueOf(ts.Compact) },
	defaults: func() reflect.Value {
		c := compact.DefaultConfig()
		return reflect.ValueOf(&c)
	},
	validate: func(v reflect.Value) []fieldProblem {
		return asFieldProblems(v.Interface().(*compact.Config).Validate())
	},
	store: func(r *Resolved, v reflect.Value) { r.Compact = *v.Interface().(*compact.Config) },
	fallbacks: []propFallback{{
		prop:  PropTargetFileSize,
		field: "target_file_size",
		parse: func(s string) (any, error) {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return nil, errors.New("not an integer")
			}
			if n <= 0 {
				return nil, errors.New("not positive")
			}
			return n, nil
		},
	}},
}, {
	key:   "expire",
	block: func(ts TaskSet) reflect.Value { return reflect.ValueOf(ts.Expire) },
	defaults: func() reflect.Value {
		c := expire.DefaultConfig()
		return reflect.ValueOf(&c)
	},
	validate: func(v reflect.Value) []fieldProblem {
		return asFieldProblems(v.Interface().(*expire.Config).Validate())
	},
	store: func(r *Resolved, v reflect.Value) { r.Expire = *v.Interface().(*expire.Config) },
}, {
	key:   "orphans",
	block: func(ts TaskSet) reflect.Value { return reflect.ValueOf(ts.Orphans) },
	defaults: func() reflect.Value {
		c := orphans.DefaultConfig()
		return reflect.ValueOf(&c)
	},
	validate: func(v reflect.Value) []fieldProblem {
		return asFieldProblems(v.Interface().(*orphans.Config).Validate())
	},
	store: func(r *Resolved, v reflect.Value) { r.Orphans = *v.Interface().(*orphans.Config) },
}}

// triggerSpec is the spec of one task's trigger block: it resolves field by
// field through the same layers, with its own defaults, and is reported at
// paths like defaults.compact.trigger.commit_count.
func triggerSpec(task string, block func(TaskSet) *TriggerSettings) taskSpec {
	return taskSpec{
		key:   task + ".trigger",
		block: func(ts TaskSet) reflect.Value { return reflect.ValueOf(block(ts)) },
		defaults: func() reflect.Value {
			c := defaultTrigger(task)
			return reflect.ValueOf(&c)
		},
		validate: func(v reflect.Value) []fieldProblem {
			return asFieldProblems(v.Interface().(*trigger.Config).Validate())
		},
		store: func(r *Resolved, v reflect.Value) {
			if r.Triggers == nil {
				r.Triggers = map[string]trigger.Config{}
			}
			r.Triggers[task] = *v.Interface().(*trigger.Config)
		},
	}
}

func init() {
	tasks = append(tasks,
		triggerSpec("compact", func(ts TaskSet) *TriggerSettings {
			if ts.Compact == nil {
				return nil
			}
			return ts.Compact.Trigger
		}),
		triggerSpec("expire", func(ts TaskSet) *TriggerSettings {
			if ts.Expire == nil {
				return nil
			}
			return ts.Expire.Trigger
		}),
		triggerSpec("orphans", func(ts TaskSet) *TriggerSettings {
			if ts.Orphans == nil {
				return nil
			}
			return ts.Orphans.Trigger
		}),
	)
}

// asFieldProblems turns a component's Validate error into field problems.
func asFieldProblems(err error) []fieldProblem {
	return fieldProblems(err, func(err error) (fieldProblem, bool) {
		var fe *validate.FieldError
		if errors.As(err, &fe) {
			return fieldProblem{field: fe.Field, value: fe.Value, msg: fe.Msg}, true
		}
		return fieldProblem{}, false
	})
}

// fieldProblem is a component's FieldError, made independent of its package.
type fieldProblem struct {
	field string // snake_case key in the task block; "" if unknown
	value any
	msg   string
}

func fieldProblems(err error, as func(error) (fieldProblem, bool)) []fieldProblem {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []fieldProblem
	for _, e := range errs {
		if fp, ok := as(e); ok {
			out = append(out, fp)
		} else {
			out = append(out, fieldProblem{msg: e.Error()})
		}
	}
	return out
}

// settingsField finds the settings struct field with YAML key key.
func settingsField(settingsType reflect.Type, key string) (reflect.StructField, bool) {
	for _, f := range Fields(settingsType) {
		if f.Name == key {
			return settingsType.FieldByIndex(f.Index), true
		}
	}
	return reflect.StructField{}, false
}

func (t taskSpec) settingsType() reflect.Type { return t.block(TaskSet{}).Type().Elem() }

// sets reports whether ts sets the field with YAML key key in this task.
func (t taskSpec) sets(ts TaskSet, key string) bool {
	b := t.block(ts)
	if b.IsNil() {
		return false
	}
	f, ok := settingsField(b.Type().Elem(), key)
	return ok && !b.Elem().FieldByIndex(f.Index).IsNil()
}

// apply copies every set field of ts's block onto cfg (a pointer to the
// component's Config), converting Size and Duration to their Go types.
func (t taskSpec) apply(ts TaskSet, cfg reflect.Value) {
	b := t.block(ts)
	if b.IsNil() {
		return
	}
	st := b.Type().Elem()
	for i := range st.NumField() {
		fv := b.Elem().Field(i)
		if fv.IsNil() || fv.Type() == reflect.TypeFor[*TriggerSettings]() {
			continue // the trigger block is a spec of its own
		}
		dst := cfg.Elem().FieldByName(st.Field(i).Name)
		dst.Set(fv.Elem().Convert(dst.Type()))
	}
}

// setField sets the Config field behind YAML key key to val.
func (t taskSpec) setField(cfg reflect.Value, key string, val any) {
	f, ok := settingsField(t.settingsType(), key)
	if !ok {
		panic("config: no settings field " + key)
	}
	dst := cfg.Elem().FieldByName(f.Name)
	dst.Set(reflect.ValueOf(val).Convert(dst.Type()))
}

// formatValue prints a problem's value, sizes in human units.
func (t taskSpec) formatValue(key string, v any) string {
	if f, ok := settingsField(t.settingsType(), key); ok && f.Type.Elem() == reflect.TypeFor[Size]() {
		if n, ok := v.(int64); ok {
			return Size(n).String()
		}
	}
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// layer is one block of settings with the path where it was written.
type layer struct {
	path string // "defaults" or "tables[i]"
	set  TaskSet
}

// resolve applies layers in order on the task's defaults.
func (t taskSpec) resolve(layers []layer) reflect.Value {
	cfg := t.defaults()
	for _, l := range layers {
		t.apply(l.set, cfg)
	}
	return cfg
}

// locate maps a field problem of a config resolved from layers to a
// Problem: at the key in the last layer that set the field, else at the
// block (or entry) of the last layer. subject is the layer path under which
// the problem is reported ("" = the layer that set the value); a problem
// whose value comes from another layer says so.
func (c *Config) locate(file string, t taskSpec, layers []layer, subject string, fp fieldProblem, note string) Problem {
	msg := fp.msg
	if fp.field != "" {
		msg += " (got " + t.formatValue(fp.field, fp.value) + ")"
	}
	var at position
	var src *layer
	if fp.field != "" {
		for i := len(layers) - 1; i >= 0; i-- {
			if t.sets(layers[i].set, fp.field) {
				src = &layers[i]
				break
			}
		}
	}
	switch {
	case src != nil:
		at = c.posOf(src.path + "." + t.key + "." + fp.field)
		if subject == "" {
			subject = src.path
		} else if subject != src.path {
			msg += fmt.Sprintf(" (set in %s.%s)", src.path, t.key)
		}
	case len(layers) > 0:
		at = c.posOf(layers[len(layers)-1].path + "." + t.key)
		if subject == "" {
			subject = layers[len(layers)-1].path
		}
	}
	path := t.key
	if subject != "" {
		path = subject + "." + t.key
	}
	if fp.field != "" {
		path += "." + fp.field
	}
	return Problem{File: file, Line: at.line, Col: at.col, Path: path, Msg: msg + note}
}

// posOf returns the recorded position of path or of its closest parent.
func (c *Config) posOf(path string) position {
	for {
		if p, ok := c.pos[path]; ok {
			return p
		}
		if path == "" {
			return position{}
		}
		path = parentPath(path)
	}
}

// Managed reports whether the table ident ("ns1.ns2.table") is maintained:
// it matches some tables[].match, or tables is empty.
func (c *Config) Managed(ident string) bool {
	if len(c.Tables) == 0 {
		return true
	}
	for _, t := range c.Tables {
		if MatchGlob(t.Match, ident) {
			return true
		}
	}
	return false
}

func (c *Config) layersFor(ident string) []layer {
	layers := []layer{{path: "defaults", set: c.Defaults}}
	for i, t := range c.Tables {
		if MatchGlob(t.Match, ident) {
			layers = append(layers, layer{path: fmt.Sprintf("tables[%d]", i), set: t.TaskSet})
		}
	}
	return layers
}

// ForTable returns the effective settings of the table ident
// ("ns1.ns2.table") whose Iceberg table properties are props. For each
// field, the last of these that sets it wins:
//
//  1. the component's DefaultConfig() (compact.DefaultConfig);
//  2. table properties, only for fields that neither defaults nor any
//     matching override sets (write.target-file-size-bytes ->
//     compact target_file_size); a property that does not parse or would
//     make the settings invalid is ignored and named in Resolved.Warnings;
//  3. the defaults block;
//  4. each tables[] entry whose match matches ident, in file order.
//
// Load has validated defaults alone and defaults with each override; when
// two overrides that match the same table combine into invalid settings,
// ForTable returns them with a *ValidationError pointing at the keys that
// set the values, and the caller should fail that table only.
func (c *Config) ForTable(ident string, props map[string]string) (Resolved, error) {
	var r Resolved
	ps := &problems{file: c.Path}
	layers := c.layersFor(ident)
	for _, t := range tasks {
		cfg := t.resolve(layers)
		for _, fb := range t.fallbacks {
			raw, ok := props[fb.prop]
			if !ok || c.anySets(t, layers, fb.field) {
				continue
			}
			val, err := fb.parse(raw)
			if err != nil {
				r.Warnings = append(r.Warnings, fmt.Sprintf("table property %s=%q ignored: %v", fb.prop, raw, err))
				continue
			}
			trial := reflect.New(cfg.Elem().Type())
			trial.Elem().Set(cfg.Elem())
			t.setField(trial, fb.field, val)
			before, after := t.validate(cfg), t.validate(trial)
			if fp, worse := newProblem(before, after); worse {
				r.Warnings = append(r.Warnings, fmt.Sprintf("table property %s=%q ignored: %s %s (got %s)", fb.prop, raw, fp.field, fp.msg, t.formatValue(fp.field, fp.value)))
				continue
			}
			cfg = trial
		}
		for _, fp := range t.validate(cfg) {
			ps.list = append(ps.list, c.locate(c.Path, t, layers, "", fp, " (resolving table "+ident+")"))
		}
		t.store(&r, cfg)
	}
	return r, ps.err()
}

func (c *Config) anySets(t taskSpec, layers []layer, key string) bool {
	for _, l := range layers {
		if t.sets(l.set, key) {
			return true
		}
	}
	return false
}

// newProblem returns a problem of after that before does not have.
func newProblem(before, after []fieldProblem) (fieldProblem, bool) {
	seen := map[string]int{}
	for _, fp := range before {
		seen[fp.field+"\x00"+fp.msg]++
	}
	for _, fp := range after {
		k := fp.field + "\x00" + fp.msg
		if seen[k] > 0 {
			seen[k]--
			continue
		}
		return fp, true
	}
	return fieldProblem{}, false
}
