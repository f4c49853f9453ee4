package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// Block is one task block as written in defaults or in a tables[] entry:
// the task's own Config (compact.Config...) holding the values of the keys
// the block writes, and its trigger block. The other fields stay zero: which
// keys a block writes is known from the positions the decoder records, so a
// key is declared once, by the yaml tag of the component's Config field.
type Block[C any] struct {
	Config C `yaml:",inline"`
	// Limits are the keys every task block has beside the task's own
	// (max_run_time), read by the runner.
	Limits  maintenance.TaskLimits `yaml:",inline"`
	Trigger *trigger.Config        `yaml:"trigger"` // nil when the block has none
}

// TaskSet holds the task blocks of defaults or of one tables[] entry by task
// key ("compact"); each value is the *Block of that task's Config type. A
// task whose block is absent (or empty) has no entry.
type TaskSet map[string]any

// TableOverride is one entry of tables: settings applied on top of defaults
// (and of earlier matching overrides) to the tables Match matches.
type TableOverride struct {
	Match   string           `yaml:"match"` // glob over "ns1.ns2.table", see MatchGlob
	TaskSet `yaml:",inline"` // the decoder gives it the keys that are task names
}

// Resolved is the effective configuration of one table.
type Resolved struct {
	Compact compact.Config
	Expire  expire.Config
	Orphans orphans.Config
	// Triggers by task name (compact, expire, orphans).
	Triggers map[string]trigger.Config
	// Limits by task name: how long a run of the task may take.
	Limits map[string]maintenance.TaskLimits
	// Warnings name table properties that were ignored because they do not
	// parse or are out of range; the caller logs them.
	Warnings []string
	// Settings by task name: the values not at their built-in defaults,
	// with where each came from.
	Settings map[string][]maintenance.Setting
	// Invalid by task name: the table's maintainer.* properties for the
	// task that cannot be honoured (ErrTableProperty). That task's other
	// fields hold the settings without the table's maintainer.* properties.
	Invalid map[string]error
}

// PropTargetFileSize is the table property used for target_file_size when
// the config does not set it for the table.
const PropTargetFileSize = "write.target-file-size-bytes"

// tasks is the registry of task blocks, in the order they are resolved.
// Adding a task takes one entry here and its field in Resolved: the keys of
// its block are the yaml tags of its Config.
//
// The default triggers are Flink-like thresholds that keep a busy table
// healthy, an interval that catches a table whose writers stopped just short
// of them, and a rate limit so a fast streaming writer does not keep a task
// running back to back. A task never run on a table is due at once (the
// interval has never elapsed), so a fresh CronJob run does the work.
var tasks = []task{
	newTask("compact", compact.DefaultConfig, compact.Config.Validate,
		func(r *Resolved, c compact.Config) { r.Compact = c },
		trigger.Config{CommitCount: 10, Interval: 24 * time.Hour, RateLimit: 10 * time.Minute},
		propFallback{prop: PropTargetFileSize, field: "target_file_size", parse: parseTargetFileSize}),
	newTask("expire", expire.DefaultConfig, expire.Config.Validate,
		func(r *Resolved, c expire.Config) { r.Expire = c },
		trigger.Config{CommitCount: 50, Interval: 6 * time.Hour, RateLimit: 10 * time.Minute}),
	// Listing the table location is the expensive part of orphan removal.
	newTask("orphans", orphans.DefaultConfig, orphans.Config.Validate,
		func(r *Resolved, c orphans.Config) { r.Orphans = c },
		trigger.Config{Interval: 24 * time.Hour, RateLimit: time.Hour}),
}

func parseTargetFileSize(s string) (any, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return nil, errors.New("not an integer")
	}
	if n <= 0 {
		return nil, errors.New("not positive")
	}
	return n, nil
}

// task is one entry of the registry: the key of a task block and how its
// Config and its trigger's are resolved.
type task struct {
	key      string
	newBlock func() reflect.Value // a pointer to a new, empty Block of the task's Config
	own      taskSpec             // the task's Config
	limits   taskSpec             // the runner's limits in its block
	trigger  taskSpec             // its trigger block's
}

// newTask builds a registry entry for the task whose block is decoded onto
// C: defaults gives C's defaults, validate checks a resolved C, store puts
// it into Resolved, and trig is the task's default trigger.
func newTask[C any](key string, defaults func() C, validate func(C) error, store func(*Resolved, C), trig trigger.Config, fallbacks ...propFallback) task {
	block := func(ts TaskSet) *Block[C] {
		b, _ := ts[key].(*Block[C])
		return b
	}
	own := newSpec(key, func(b *Block[C]) *C { return &b.Config }, block, defaults, validate, store)
	own.fallbacks = fallbacks
	return task{
		key:      key,
		newBlock: func() reflect.Value { return reflect.ValueOf(new(Block[C])) },
		own:      own,
		// The limits sit in the task's block itself
		// (defaults.compact.max_run_time) and resolve the same way.
		limits: newSpec(key, func(b *Block[C]) *maintenance.TaskLimits { return &b.Limits }, block,
			maintenance.DefaultTaskLimits, maintenance.TaskLimits.Validate,
			func(r *Resolved, l maintenance.TaskLimits) { setIn(&r.Limits, key, l) }),
		// The trigger block resolves field by field through the same
		// layers, with its own defaults, and is reported at paths like
		// defaults.compact.trigger.commit_count.
		trigger: newSpec(key+".trigger", func(b *Block[C]) *trigger.Config { return b.Trigger }, block,
			func() trigger.Config { return trig }, trigger.Config.Validate,
			func(r *Resolved, c trigger.Config) { setIn(&r.Triggers, key, c) }),
	}
}

// newSpec builds the spec of one part T of a task's Block[C]: get returns
// the part a block holds (nil when absent), block the task's block of a
// layer (nil when absent).
func newSpec[C, T any](key string, get func(*Block[C]) *T, block func(TaskSet) *Block[C], defaults func() T, validate func(T) error, store func(*Resolved, T)) taskSpec {
	task, _, _ := strings.Cut(key, ".")
	return taskSpec{
		key:  key,
		task: task,
		typ:  reflect.TypeFor[T](),
		part: func(ts TaskSet) (reflect.Value, bool) {
			if b := block(ts); b != nil {
				if p := get(b); p != nil {
					return reflect.ValueOf(p), true
				}
			}
			return reflect.Value{}, false
		},
		defaults: func() reflect.Value {
			c := defaults()
			return reflect.ValueOf(&c)
		},
		validate: func(v reflect.Value) []fieldProblem { return asFieldProblems(validate(*v.Interface().(*T))) },
		store:    func(r *Resolved, v reflect.Value) { store(r, *v.Interface().(*T)) },
	}
}

// setIn sets (*m)[key] to v, making the map if needed.
func setIn[T any](m *map[string]T, key string, v T) {
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[key] = v
}

// specsOf lists what resolves through the layers: every task's own Config
// and limits, then every task's trigger.
func specsOf(ts []task) []taskSpec {
	out := make([]taskSpec, 0, 3*len(ts))
	for _, t := range ts {
		out = append(out, t.own, t.limits)
	}
	for _, t := range ts {
		out = append(out, t.trigger)
	}
	return out
}

// TaskBlock is one task block that defaults and each tables[] entry may
// hold: its key and the type it decodes onto, a Block of the task's Config.
type TaskBlock struct {
	Key  string
	Type reflect.Type
}

// TaskBlocks lists the task blocks in their order (the docs' drift test
// walks the schema with it).
func TaskBlocks() []TaskBlock {
	out := make([]TaskBlock, len(tasks))
	for i, t := range tasks {
		out[i] = TaskBlock{Key: t.key, Type: t.newBlock().Type().Elem()}
	}
	return out
}

// taskSpec is one Config resolved field by field through the layers: a
// task's own or its trigger's.
type taskSpec struct {
	key  string       // where its keys sit in a layer: "compact", "compact.trigger"
	task string       // the task's key: "compact"
	typ  reflect.Type // the Config type
	// part returns a pointer to the Config a layer's block holds, if the
	// layer has that block.
	part     func(TaskSet) (reflect.Value, bool)
	defaults func() reflect.Value // pointer to a fresh default Config
	validate func(reflect.Value) []fieldProblem
	store    func(*Resolved, reflect.Value)
	// fallbacks fill fields from table properties when no layer sets them.
	fallbacks []propFallback
}

type propFallback struct {
	prop  string
	field string // YAML key of the Config field
	parse func(string) (any, error)
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

// field finds the Config field with YAML key key.
func (t taskSpec) field(key string) (Field, bool) {
	for _, f := range Fields(t.typ) {
		if f.Name == key {
			return f, true
		}
	}
	return Field{}, false
}

// layer is one block of settings with the path where it was written.
type layer struct {
	path string // "defaults" or "tables[i]"
	set  TaskSet
}

// keyPath is the path of the key key of this Config in layer l.
func (t taskSpec) keyPath(l layer, key string) string { return l.path + "." + t.key + "." + key }

// sets reports whether layer l sets the field with YAML key key; isSet says
// whether a key path was written (and decoded).
func (t taskSpec) sets(l layer, key string, isSet func(string) bool) bool {
	_, ok := t.part(l.set)
	return ok && isSet(t.keyPath(l, key))
}

// resolve applies layers in order on the task's defaults: each layer's block
// replaces the fields whose keys it sets.
func (t taskSpec) resolve(layers []layer, isSet func(string) bool) reflect.Value {
	cfg := t.defaults()
	for _, l := range layers {
		src, ok := t.part(l.set)
		if !ok {
			continue
		}
		for _, f := range Fields(t.typ) {
			if !isSet(t.keyPath(l, f.Name)) {
				continue
			}
			v := src.Elem().FieldByIndex(f.Index)
			if k := v.Kind(); (k == reflect.Map || k == reflect.Slice) && v.IsNil() {
				// A key written with no value ("equal_schemes:") sets
				// nothing, as an empty block does; "{}" or "[]" does set.
				continue
			}
			cfg.Elem().FieldByIndex(f.Index).Set(v)
		}
	}
	return cfg
}

// setField sets the Config field behind YAML key key to val.
func (t taskSpec) setField(cfg reflect.Value, key string, val any) {
	f, ok := t.field(key)
	if !ok {
		panic("config: no field with key " + key + " in " + t.typ.String())
	}
	dst := cfg.Elem().FieldByIndex(f.Index)
	dst.Set(reflect.ValueOf(val).Convert(dst.Type()))
}

// formatValue prints a problem's value, sizes in human units.
func (t taskSpec) formatValue(key string, v any) string {
	if f, ok := t.field(key); ok && f.Size {
		if n, ok := v.(int64); ok {
			return Size(n).String()
		}
	}
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// locate maps a field problem of a config resolved from layers to a
// Problem: at the key in the last layer that set the field, else at the
// block (or entry) of the last layer. subject is the layer path under which
// the problem is reported ("" = the layer that set the value); a problem
// whose value comes from another layer says so.
func (c *Config) locate(file string, t taskSpec, layers []layer, isSet func(string) bool, subject string, fp fieldProblem, note string) Problem {
	msg := fp.msg
	if fp.field != "" {
		msg += " (got " + t.formatValue(fp.field, fp.value) + ")"
	}
	var at position
	var src *layer
	if fp.field != "" {
		for i := len(layers) - 1; i >= 0; i-- {
			if t.sets(layers[i], fp.field, isSet) {
				src = &layers[i]
				break
			}
		}
	}
	switch {
	case src != nil:
		at = c.posOf(t.keyPath(*src, fp.field))
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

// isSet reports whether the file wrote the key at path. A loaded Config has
// no problems, so every written key was decoded.
func (c *Config) isSet(path string) bool {
	_, ok := c.pos[path]
	return ok
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
//  4. each tables[] entry whose match matches ident, in file order;
//  5. the table's maintainer.<task>.<key> properties
//     (maintainer.compact.enabled, maintainer.compact.trigger.interval),
//     parsed as the YAML values are. A task with one that does not parse,
//     names no key, or that the task's validation refuses (a safety floor:
//     orphans min_age below 24h) keeps the settings of 1-4 and is named in
//     Resolved.Invalid with every such property; the runner fails that task
//     on that table.
//
// Load has validated defaults alone and defaults with each override; when
// two overrides that match the same table combine into invalid settings,
// ForTable returns them with a *ValidationError pointing at the keys that
// set the values, and the caller should fail that table only.
func (c *Config) ForTable(ident string, props map[string]string) (Resolved, error) {
	var r Resolved
	ps := &problems{file: c.Path}
	layers := c.layersFor(ident)
	specs := c.specs
	if specs == nil { // a Config not made by Parse: the built-in tasks
		specs = specsOf(tasks)
	}
	used := map[string]bool{}
	invalid := map[string][]error{}
	for _, t := range specs {
		cfg := t.resolve(layers, c.isSet)
		fellBack := map[string]string{}
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
			if fps := newProblems(t.validate(cfg), t.validate(trial)); len(fps) > 0 {
				fp := fps[0]
				r.Warnings = append(r.Warnings, fmt.Sprintf("table property %s=%q ignored: %s %s (got %s)", fb.prop, raw, fp.field, fp.msg, t.formatValue(fp.field, fp.value)))
				continue
			}
			cfg = trial
			fellBack[fb.field] = fb.prop
		}
		for _, fp := range t.validate(cfg) {
			ps.list = append(ps.list, c.locate(c.Path, t, layers, c.isSet, "", fp, " (resolving table "+ident+")"))
		}
		withProps, set, errs := t.overrides(cfg, props, used)
		if len(errs) == 0 {
			errs = t.refused(cfg, withProps, set, props)
		}
		if len(errs) == 0 {
			cfg = withProps
		} else {
			invalid[t.task] = append(invalid[t.task], errs...)
			set = nil
		}
		if s := t.settings(cfg, layers, c.isSet, fellBack, set); len(s) > 0 {
			setIn(&r.Settings, t.task, append(r.Settings[t.task], s...))
		}
		t.store(&r, cfg)
	}
	unknown := unknownProps(specs, props, used)
	for _, task := range taskKeys(specs) {
		// A property that names no task could be any task's: each fails.
		errs := slices.Concat(invalid[task], unknown[task], unknown[""])
		if len(errs) > 0 {
			setIn(&r.Invalid, task, fmt.Errorf("table %s: %w", ident, joinErrors(errs)))
		}
	}
	return r, ps.err()
}

func (c *Config) anySets(t taskSpec, layers []layer, key string) bool {
	for _, l := range layers {
		if t.sets(l, key, c.isSet) {
			return true
		}
	}
	return false
}
