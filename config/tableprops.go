package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/tableprops"
	"github.com/iceberg-maintainer/maintainer/internal/units"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

// ErrTableProperty marks a table's maintainer.* property that cannot be
// honoured: it does not parse, names no key, or asks for what the task's
// validation (its safety floors included) refuses. The task fails on that
// table with it; the other tasks and tables are unaffected.
var ErrTableProperty = errors.New("table property refused")

// Sources of a setting, as Resolved.Settings reports them.
const (
	sourceConfig   = "config "         // + the layer: "config defaults", "config tables[1]"
	sourceProperty = "table property " // + the property's name
)

// propName is the table property that overrides the field key of this
// Config: maintainer.compact.target_file_size,
// maintainer.compact.trigger.commit_count.
func (t taskSpec) propName(key string) string {
	return tableprops.OverridePrefix + t.key + "." + key
}

// overrides applies the table's maintainer.* properties for this Config to
// a copy of cfg, each value parsed by the decoder that reads the YAML file.
// It returns the copy, the property each set field came from (by key), and
// one error per property that does not parse; used collects the names of
// the properties that belong to this Config.
func (t taskSpec) overrides(cfg reflect.Value, props map[string]string, used map[string]bool) (reflect.Value, map[string]string, []error) {
	out := reflect.New(cfg.Elem().Type())
	out.Elem().Set(cfg.Elem())
	set := map[string]string{}
	var errs []error
	for _, f := range Fields(t.typ) {
		name := t.propName(f.Name)
		raw, ok := props[name]
		if !ok {
			continue
		}
		used[name] = true
		if msg, ok := decodeProperty(f, strings.TrimSpace(raw), out.Elem().FieldByIndex(f.Index)); !ok {
			errs = append(errs, propError(name, raw, msg))
			continue
		}
		set[f.Name] = name
	}
	return out, set, errs
}

// decodeProperty parses a property's text into the field v with the
// decoder's own scalar parsing (units, durations, booleans), without
// ${VAR} expansion: a table's owner must not read the maintainer's
// environment. It returns the problem when the text does not parse.
func decodeProperty(f Field, text string, v reflect.Value) (string, bool) {
	ps := &problems{}
	d := &decoder{ps: ps, pos: map[string]position{}, bad: map[string]bool{}}
	if v.Kind() == reflect.Pointer {
		nv := reflect.New(v.Type().Elem())
		if msg, ok := decodeProperty(f, text, nv.Elem()); !ok {
			return msg, false
		}
		v.Set(nv)
		return "", true
	}
	switch k := v.Kind(); {
	case isText(v.Type()):
	case k == reflect.Map || k == reflect.Slice || k == reflect.Struct:
		return fmt.Sprintf("cannot be set by a table property (it is %s); set it in the config", want(v.Type())), false
	}
	if text == "" {
		return fmt.Sprintf("missing value (expected %s)", want(v.Type())), false
	}
	if f.Size {
		var s Size
		if !d.decodeText("", position{}, text, reflect.ValueOf(&s).Elem()) {
			return ps.list[0].Msg, false
		}
		v.SetInt(int64(s))
		return "", true
	}
	if !d.decodeText("", position{}, text, v) {
		return ps.list[0].Msg, false
	}
	return "", true
}

func propError(name, raw, msg string) error {
	return fmt.Errorf("%w: %s=%q: %s", ErrTableProperty, name, raw, msg)
}

// refused returns an error for each problem that applying the properties
// (set, by key) to cfg adds to those cfg already has: a value below a
// floor, or one that contradicts the config's other values.
func (t taskSpec) refused(cfg, withProps reflect.Value, set map[string]string, props map[string]string) []error {
	var errs []error
	for _, fp := range newProblems(t.validate(cfg), t.validate(withProps)) {
		got := ""
		if fp.field != "" {
			got = " (got " + t.formatValue(fp.field, fp.value) + ")"
		}
		if name, ok := set[fp.field]; ok {
			errs = append(errs, propError(name, props[name], fp.msg+got))
			continue
		}
		// A rule between two fields that only one property set (a
		// min_file_size from the config above a target from the table).
		names := slices.Sorted(maps.Values(set))
		what := fp.msg
		if fp.field != "" {
			what = fp.field + " " + fp.msg + got
		}
		with := "with them"
		if len(names) == 1 {
			with = "with it"
		}
		errs = append(errs, fmt.Errorf("%w: %s: %s, %s", ErrTableProperty, quoteProps(names, props), with, what))
	}
	return errs
}

func quoteProps(names []string, props map[string]string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%s=%q", n, props[n])
	}
	return strings.Join(q, ", ")
}

// joinErrors is errors.Join on one line, for an outcome's error field.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return joined(errs)
}

type joined []error

func (j joined) Error() string {
	s := make([]string, len(j))
	for i, e := range j {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func (j joined) Unwrap() []error { return j }

// newProblems returns the problems of after that before does not have.
func newProblems(before, after []fieldProblem) []fieldProblem {
	seen := map[string]int{}
	for _, fp := range before {
		seen[fp.field+"\x00"+fp.msg]++
	}
	var out []fieldProblem
	for _, fp := range after {
		k := fp.field + "\x00" + fp.msg
		if seen[k] > 0 {
			seen[k]--
			continue
		}
		out = append(out, fp)
	}
	return out
}

// unknownProps returns an error for each maintainer.* property no Config
// took, by the task it names ("" when it names none): a misspelt opt-out
// must not be ignored.
func unknownProps(specs []taskSpec, props map[string]string, used map[string]bool) map[string][]error {
	tasks := taskKeys(specs)
	keys := map[string][]string{} // task -> the keys its properties may name
	for _, t := range specs {
		for _, f := range Fields(t.typ) {
			keys[t.task] = append(keys[t.task], strings.TrimPrefix(t.key+"."+f.Name, t.task+"."))
		}
	}
	out := map[string][]error{}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		rest, ok := strings.CutPrefix(name, tableprops.OverridePrefix)
		if !ok && len(name) >= len(tableprops.OverridePrefix) && strings.EqualFold(name[:len(tableprops.OverridePrefix)], tableprops.OverridePrefix) {
			// Maintainer.compact.enabled: property names are
			// case-sensitive, and an opt-out quietly ignored for its
			// spelling would let the task run.
			task, _, _ := strings.Cut(name[len(tableprops.OverridePrefix):], ".")
			task = strings.ToLower(task)
			if !slices.Contains(tasks, task) {
				task = ""
			}
			out[task] = append(out[task], propError(name, props[name], fmt.Sprintf("property names are case-sensitive: write %q", strings.ToLower(name))))
			continue
		}
		if !ok || used[name] {
			continue
		}
		task, key, _ := strings.Cut(rest, ".")
		if !slices.Contains(tasks, task) {
			msg := fmt.Sprintf("names no task %q (the tasks: %s)", task, strings.Join(tasks, ", "))
			if near := nearestTask(task, tasks); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			out[""] = append(out[""], propError(name, props[name], msg))
			continue
		}
		msg := "unknown key"
		if key != "" {
			msg = unknownKey(key, keys[task])
		}
		out[task] = append(out[task], propError(name, props[name], msg))
	}
	return out
}

// nearestTask suggests the task a misspelt name meant: a close spelling
// (expiry), or a task the name starts with (compaction).
func nearestTask(name string, tasks []string) string {
	if near := nearest(name, tasks); near != "" {
		return near
	}
	for _, t := range tasks {
		if strings.HasPrefix(name, t) {
			return t
		}
	}
	return ""
}

// taskKeys lists the tasks of specs, once each, in order.
func taskKeys(specs []taskSpec) []string {
	var out []string
	for _, t := range specs {
		if !slices.Contains(out, t.task) {
			out = append(out, t.task)
		}
	}
	return out
}

// settings lists the fields of cfg that a table property set, and those
// that differ from the built-in default, with their sources: the table
// property that overrode it (fromProp), else the last config layer that set
// it, else the table property the config fell back on (fallback). A config
// key that repeats the default is not listed: it changes nothing.
func (t taskSpec) settings(cfg reflect.Value, layers []layer, isSet func(string) bool, fallback, fromProp map[string]string) []maintenance.Setting {
	var out []maintenance.Setting
	def := t.defaults()
	for _, f := range Fields(t.typ) {
		src := ""
		v := cfg.Elem().FieldByIndex(f.Index)
		if p, ok := fromProp[f.Name]; ok {
			src = sourceProperty + p
		} else if reflect.DeepEqual(v.Interface(), def.Elem().FieldByIndex(f.Index).Interface()) {
			continue
		} else {
			for i := len(layers) - 1; i >= 0 && src == ""; i-- {
				if t.sets(layers[i], f.Name, isSet) {
					src = sourceConfig + layers[i].path
				}
			}
		}
		if p, ok := fallback[f.Name]; ok && src == "" {
			src = sourceProperty + p
		}
		if src == "" {
			continue
		}
		set := maintenance.Setting{Key: t.key + "." + f.Name, Value: formatSetting(f, v), Source: src}
		if f.Size {
			n := v.Int()
			set.Bytes = &n
		}
		out = append(out, set)
	}
	return out
}

// formatSetting writes a value as the config file would: sizes and
// durations with units.
func formatSetting(f Field, v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch {
	case f.Size:
		return Size(v.Int()).String()
	case v.Type() == durationType:
		return units.FormatDuration(time.Duration(v.Int()))
	}
	return fmt.Sprint(v.Interface())
}
