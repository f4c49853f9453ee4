package docs

import (
	"encoding"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
)

// The conventions configuration.md follows, and this file checks:
//
//   - Every key is one row of a table whose header starts with
//     | key | type | default | meaning |. The key cell is one code span with
//     the key's full path: `scheduler.poll_interval`, `lock.redis.addrs`,
//     `tables[].match`. Task keys, valid under defaults: and under each
//     tables[] entry, are written from the task block down:
//     `compact.target_file_size`, `expire.trigger.interval`.
//   - The type cell starts with the key's type word: string, integer,
//     number, boolean, size, duration, list or map.
//   - The default cell either starts with a code span holding the default
//     as one would write it in YAML (`30s`, `2`, `":8080"`,
//     `{s3a: s3, s3n: s3}`), which must parse and change nothing when set, or
//     is prose ("none", "off", "table's ... else ...", "required"), which
//     stands for "derived or unset": the code's default must then be the zero
//     value.
//   - A code span anywhere in docs/ that looks like a key path
//     (`metrics.max_tables`, `defaults.compact.where`, `tables[0].match`) must
//     name a key or a block of the schema.

// schemaKey is one leaf of the config schema.
type schemaKey struct {
	path  string       // canonical: "scheduler.poll_interval", "compact.trigger.interval", "tables[].match"
	raw   []string     // YAML path as written in a file: defaults, compact, trigger, interval
	typ   reflect.Type // leaf type, pointers removed
	index []int        // field index from config.Config (top-level keys only)
	task  string       // task block key (compact, expire, orphans) for task keys
	trig  bool         // inside a task's trigger block
	field string       // Go field name of the leaf
}

var (
	sizeType     = reflect.TypeFor[config.Size]()
	durationType = reflect.TypeFor[config.Duration]()
	taskSetType  = reflect.TypeFor[config.TaskSet]()
	goDuration   = reflect.TypeFor[time.Duration]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

type yamlField struct {
	name  string
	field reflect.StructField
	index []int
	typ   reflect.Type // the field's type, or sizeType for an int64 with the size option
}

// yamlFields lists a struct's YAML keys as package config decodes them.
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for _, f := range config.Fields(t) {
		sf := t.FieldByIndex(f.Index)
		typ := sf.Type
		if f.Size {
			typ = sizeType
		}
		out = append(out, yamlField{name: f.Name, field: sf, index: f.Index, typ: typ})
	}
	return out
}

// holdsTasks reports whether the task blocks are keys of t: t is a TaskSet
// or inlines one.
func holdsTasks(t reflect.Type) bool {
	if t == taskSetType {
		return true
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.Type == taskSetType && strings.Contains(f.Tag.Get("yaml"), "inline") {
			return true
		}
	}
	return false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func isLeaf(t reflect.Type) bool {
	t = deref(t)
	if t == sizeType || t == durationType || t == goDuration || reflect.PointerTo(t).Implements(textType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Slice:
		return deref(t.Elem()).Kind() != reflect.Struct
	}
	return true
}

// schema walks config.Config by its yaml tags. Task blocks
// (config.TaskBlocks) under defaults and under tables[] are reported once,
// by their canonical path from the task down.
func schema(t *testing.T) map[string]schemaKey {
	t.Helper()
	out := map[string]schemaKey{}
	var walk func(raw []string, rt reflect.Type, index []int, task string, trig bool)
	walk = func(raw []string, rt reflect.Type, index []int, task string, trig bool) {
		rt = deref(rt)
		if holdsTasks(rt) {
			for _, b := range config.TaskBlocks() {
				walk(append(slices.Clone(raw), b.Key), b.Type, nil, b.Key, false)
			}
		}
		if rt.Kind() != reflect.Struct {
			return
		}
		for _, f := range yamlFields(rt) {
			r := append(slices.Clone(raw), f.name)
			idx := append(slices.Clone(index), f.index...)
			tk, tr := task, trig
			if tk != "" && f.name == "trigger" {
				tr = true
			}
			ft := f.typ
			if deref(ft) != taskSetType && isLeaf(ft) {
				canon := strings.Join(r, ".")
				if tk != "" {
					canon = strings.Join(r[1:], ".")
				}
				k := schemaKey{path: canon, raw: r, typ: deref(ft), task: tk, trig: tr, field: f.field.Name}
				if tk == "" {
					k.index = idx
				}
				if prev, dup := out[canon]; dup {
					if prev.typ != k.typ {
						t.Errorf("key %s has type %s under %s and %s under %s", canon, prev.typ, prev.raw[0], k.typ, k.raw[0])
					}
					if prev.raw[0] == "defaults" {
						continue // keep the defaults path for the default checks
					}
				}
				out[canon] = k
				continue
			}
			if dt := deref(ft); dt.Kind() == reflect.Slice {
				r[len(r)-1] += "[]"
				walk(r, dt.Elem(), nil, tk, tr) // index paths end at a slice
				continue
			}
			walk(r, ft, idx, tk, tr)
		}
	}
	walk(nil, reflect.TypeFor[config.Config](), nil, "", false)
	if len(out) < 40 {
		t.Fatalf("the schema walk found only %d keys", len(out))
	}
	return out
}

// blocks returns every non-leaf path of the schema ("lock.redis",
// "compact.trigger", "server.alertmanager", "catalog"...).
func blocks(keys map[string]schemaKey) map[string]bool {
	out := map[string]bool{}
	for p := range keys {
		parts := strings.Split(p, ".")
		for i := 1; i < len(parts); i++ {
			out[strings.Join(parts[:i], ".")] = true
		}
	}
	out["defaults"], out["tables"], out["tables[]"] = true, true, true
	return out
}

// typeWord is how configuration.md names a Go type.
func typeWord(t reflect.Type) string {
	switch t {
	case sizeType:
		return "size"
	case durationType, goDuration:
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list"
	case reflect.Map:
		return "map"
	}
	return t.String()
}

// docKey is one row of a key table of configuration.md.
type docKey struct {
	path, typ, def string
	line           int
}

func documentedKeys(t *testing.T) []docKey {
	t.Helper()
	f := docFile(t, "configuration.md")
	var out []docKey
	for _, tb := range f.tables() {
		if !tb.hasHeader("key", "type", "default", "meaning") {
			continue
		}
		for i, row := range tb.rows {
			at := f.path + ":" + fmt.Sprint(tb.rowLine[i])
			if len(row) < 4 {
				t.Errorf("%s: a key row needs 4 cells, has %d", at, len(row))
				continue
			}
			k, ok := onlyCodeSpan(row[0])
			if !ok {
				t.Errorf("%s: the key cell %q must be exactly one code span", at, row[0])
				continue
			}
			out = append(out, docKey{path: k, typ: row[1], def: row[2], line: tb.rowLine[i]})
		}
	}
	if len(out) == 0 {
		t.Fatal("configuration.md has no | key | type | default | meaning | table")
	}
	return out
}

// Every key of the schema is documented once, every documented key exists,
// and the documented type matches the Go type.
func TestConfigurationCoversEveryKey(t *testing.T) {
	keys := schema(t)
	seen := map[string]int{}
	for _, d := range documentedKeys(t) {
		at := fmt.Sprintf("configuration.md:%d", d.line)
		if prev, dup := seen[d.path]; dup {
			t.Errorf("%s: `%s` is documented twice (also line %d)", at, d.path, prev)
		}
		seen[d.path] = d.line
		k, ok := keys[d.path]
		if !ok {
			t.Errorf("%s: `%s` is not a config key (the schema has no such field)", at, d.path)
			continue
		}
		if want := typeWord(k.typ); !strings.HasPrefix(d.typ, want) {
			t.Errorf("%s: `%s` has type %q in the doc; the code's type is %s (%s)", at, d.path, d.typ, want, k.typ)
		}
	}
	var missing []string
	for p := range keys {
		if _, ok := seen[p]; !ok {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("configuration.md does not document `%s` (%s)", p, typeWord(keys[p].typ))
	}
}

// baseConfig is the smallest valid config the default checks build on.
const baseConfig = "catalog:\n  type: hadoop\n  warehouse: /tmp/warehouse\n"

// baseKeys are set by baseConfig, so their unset default cannot be checked.
var baseKeys = []string{"catalog.type", "catalog.warehouse"}

// effectiveOverride reads keys whose Go field does not hold the effective
// value on its own.
var effectiveOverride = map[string]func(*config.Config) any{
	"metrics.table_label": func(c *config.Config) any { return c.Metrics.TableLabelOn() },
}

// effective returns the value a key has once the config is loaded and
// resolved for a table.
func effective(t *testing.T, c *config.Config, k schemaKey) any {
	t.Helper()
	if f, ok := effectiveOverride[k.path]; ok {
		return f(c)
	}
	if k.task == "" {
		return reflect.ValueOf(c).Elem().FieldByIndex(k.index).Interface()
	}
	r, err := c.ForTable("db.events", nil)
	if err != nil {
		t.Fatalf("ForTable: %v", err)
	}
	var v reflect.Value
	if k.trig {
		v = reflect.ValueOf(r.Triggers[k.task])
	} else {
		v = resolvedTask(t, r, k.task)
	}
	fv := v.FieldByName(k.field)
	if !fv.IsValid() && !k.trig {
		// The keys every task block has beside the task's own.
		fv = reflect.ValueOf(r.Limits[k.task]).FieldByName(k.field)
	}
	if !fv.IsValid() {
		t.Fatalf("%s: the resolved %s config has no field %s", k.path, k.task, k.field)
	}
	return fv.Interface()
}

// resolvedTask returns the field of r that holds task's Config: the one of
// the type its block decodes onto.
func resolvedTask(t *testing.T, r config.Resolved, task string) reflect.Value {
	t.Helper()
	for _, b := range config.TaskBlocks() {
		if b.Key != task {
			continue
		}
		cfg, _ := b.Type.FieldByName("Config")
		rv := reflect.ValueOf(r)
		for i := range rv.NumField() {
			if rv.Type().Field(i).Type == cfg.Type {
				return rv.Field(i)
			}
		}
		t.Fatalf("config.Resolved has no field of type %s for task %s", cfg.Type, task)
	}
	t.Fatalf("no task block %s", task)
	return reflect.Value{}
}

// withKey returns baseConfig with the key at raw set to the YAML text val.
func withKey(raw []string, val string) string {
	var b strings.Builder
	b.WriteString(baseConfig)
	start := 0
	if raw[0] == "catalog" {
		start = 1 // inside the base's catalog block
	}
	for i := start; i < len(raw); i++ {
		b.WriteString(strings.Repeat("  ", i))
		if i == len(raw)-1 {
			fmt.Fprintf(&b, "%s: %s\n", raw[i], val)
		} else {
			fmt.Fprintf(&b, "%s:\n", raw[i])
		}
	}
	return b.String()
}

func noEnv(string) (string, bool) { return "", false }

// The documented defaults are the code's: setting a key to the documented
// literal changes nothing, and a key documented as "none", "off" or
// "derived" is left at its zero value.
func TestConfigurationDefaults(t *testing.T) {
	keys := schema(t)
	base, err := config.Parse("maintainer.yaml", []byte(baseConfig), noEnv)
	if err != nil {
		t.Fatalf("base config: %v", err)
	}
	checked := 0
	for _, d := range documentedKeys(t) {
		k, ok := keys[d.path]
		if !ok || k.raw[0] == "tables[]" {
			continue // reported by TestConfigurationCoversEveryKey; tables[].match is required
		}
		at := fmt.Sprintf("configuration.md:%d: `%s`", d.line, d.path)
		unset := effective(t, base, k)
		lit, isLit := "", strings.HasPrefix(strings.TrimSpace(d.def), "`")
		if isLit {
			lit = codeSpans(d.def)[0]
		}
		if slices.Contains(baseKeys, d.path) {
			continue
		}
		if !isLit {
			if !reflect.ValueOf(unset).IsZero() {
				t.Errorf("%s: the default is prose (%q) but the code's default is %v; write it as a literal code span", at, d.def, unset)
			}
			checked++
			continue
		}
		text := withKey(k.raw, lit)
		c, err := config.Parse("maintainer.yaml", []byte(text), noEnv)
		if err != nil {
			t.Errorf("%s: the documented default %s does not parse as a value of the key:\n%s\n%v", at, lit, text, err)
			continue
		}
		if set := effective(t, c, k); !reflect.DeepEqual(set, unset) {
			t.Errorf("%s: documented default %s gives %v; the code's default is %v", at, lit, set, unset)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d defaults checked", checked)
	}
}

// keyLike matches code spans that look like config key paths.
var keyLike = regexp.MustCompile(`^(catalog|lock|server|scheduler|metrics|defaults|tables(\[\d*\])?|compact|expire|orphans)(\.[a-z_]+(\[\d*\])?)+$`)

// fileLike excludes file names such as catalog.db or server.yaml.
var fileLike = regexp.MustCompile(`\.(db|json|yaml|yml|go|md|txt|log)$`)

var tablesPrefix = regexp.MustCompile(`^tables\[\d*\]`)

// Key paths mentioned in prose anywhere in docs/ exist.
func TestDocsMentionOnlyRealKeys(t *testing.T) {
	keys := schema(t)
	blk := blocks(keys)
	taskKeys := map[string]bool{}
	for _, b := range config.TaskBlocks() {
		taskKeys[b.Key] = true
	}
	n := 0
	for _, f := range docFiles(t) {
		spans, lines := f.proseSpans()
		for i, s := range spans {
			if !keyLike.MatchString(s) || fileLike.MatchString(s) {
				continue
			}
			n++
			p := tablesPrefix.ReplaceAllString(s, "tables[]")
			p = regexp.MustCompile(`\[\d+\]`).ReplaceAllString(p, "[]")
			first, rest, _ := strings.Cut(p, ".")
			if (first == "defaults" || first == "tables[]") && taskKeys[strings.SplitN(rest, ".", 2)[0]] {
				p = rest
			}
			if _, ok := keys[p]; ok || blk[p] {
				continue
			}
			if strings.HasPrefix(p, "lock.redis.addrs[") {
				continue
			}
			t.Errorf("%s:%d: `%s` is not a config key or block", f.path, lines[i], s)
		}
	}
	if n < 50 {
		t.Errorf("only %d key mentions found in docs/: is the extraction broken?", n)
	}
}

// docEnv is the environment the documented configs are parsed with: the
// variables the guides tell the reader to set.
var docEnv = map[string]string{
	"AWS_REGION":     "eu-west-1",
	"REST_URI":       "https://iceberg-rest.internal:8181",
	"REDIS_ADDR":     "redis:6379",
	"POD_NAMESPACE":  "data",
	"MAINTAINER_DIR": "/tmp/maintainer",
}

// Every ```yaml block whose first line is "# maintainer.yaml" is a valid
// config, as a new user would paste it: its *_file secrets exist (as
// placeholder files) and its ${VARS} are the ones the docs name.
func TestDocumentedConfigsAreValid(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		blocks, _ := f.fences()
		for _, b := range blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			text := strings.Join(b.body, "\n") + "\n"
			if _, err := parser.ParseBytes([]byte(text), 0); err != nil {
				t.Errorf("%s: not valid YAML: %v", b.where(), err)
				continue
			}
			if len(b.body) == 0 || !strings.HasPrefix(strings.TrimSpace(b.body[0]), "# maintainer.yaml") {
				continue
			}
			var any0 any
			if err := yaml.Unmarshal([]byte(text), &any0); err != nil {
				t.Errorf("%s: %v", b.where(), err)
				continue
			}
			n++
			t.Run(strings.ReplaceAll(b.where(), "/", "_"), func(t *testing.T) {
				dir := t.TempDir()
				text := placeSecrets(t, dir, text, any0)
				env := func(k string) (string, bool) { v, ok := docEnv[k]; return v, ok }
				if _, err := config.Parse(filepath.Join(dir, "maintainer.yaml"), []byte(text), env); err != nil {
					t.Errorf("%s: the documented config is invalid:\n%v", b.where(), err)
				}
			})
		}
	}
	if n < 8 {
		t.Errorf("only %d maintainer.yaml blocks found in docs/", n)
	}
}

// placeSecrets creates a placeholder for every *_file the config names
// (except state_file, which is written, not read) under dir, and points the
// config at them.
func placeSecrets(t *testing.T, dir, text string, doc any) string {
	t.Helper()
	var files []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && strings.HasSuffix(k, "_file") && k != "state_file" {
					files = append(files, s)
				}
				walk(val)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	slices.SortFunc(files, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, p := range slices.Compact(files) {
		local := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, []byte("placeholder-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if filepath.IsAbs(p) {
			text = strings.ReplaceAll(text, p, local)
		}
	}
	return text
}

// The filter examples of the compact.where row parse.
func TestWhereExamples(t *testing.T) {
	n := 0
	for _, tb := range docFile(t, "configuration.md").tables() {
		for i, row := range tb.rows {
			if k, _ := onlyCodeSpan(row[0]); k != "compact.where" || len(row) < 4 {
				continue
			}
			for _, ex := range codeSpans(row[3]) {
				if !strings.ContainsAny(ex, " ") {
					continue // a keyword or an operator, not a filter
				}
				n++
				if _, err := rowfilter.Parse(ex); err != nil {
					t.Errorf("configuration.md:%d: compact.where example %q: %v", tb.rowLine[i], ex, err)
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("only %d compact.where examples found", n)
	}
}
