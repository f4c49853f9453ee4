package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// decoder fills Go values from a goccy/go-yaml AST. It exists instead of
// yaml.Unmarshal because the config needs what Unmarshal does not give: every
// problem in one pass rather than the first, ${VAR} expansion of each scalar
// before it is parsed, and the line and column of every key so that later
// validation can point at the line that set a value.
//
// Struct fields are matched by their `yaml:"name"` tag (`yaml:"-"` skips a
// field, `yaml:",inline"` on a struct field lifts its fields, and on a
// TaskSet gives it the keys that name a registered task); unknown keys are
// problems. A nil pointer field means "not set". Scalars are read as text,
// expanded, then parsed for the field's type; types implementing
// encoding.TextUnmarshaler (Size, Duration) parse themselves, time.Duration
// uses ParseDuration, and an int64 tagged `yaml:"name,size"` is parsed as a
// Size, so components declare sizes without importing this package.
// Anchors, aliases and merge keys (<<) work as in YAML.
type decoder struct {
	ps      *problems
	env     func(string) (string, bool)
	pos     map[string]position // field path -> position of the key or list entry holding it
	bad     map[string]bool     // field paths that already have a problem
	anchors map[string][]*ast.AnchorNode
	depth   int
	tasks   []task // the task blocks a TaskSet accepts
}

func newDecoder(ps *problems, env func(string) (string, bool), root ast.Node, tasks []task) *decoder {
	d := &decoder{
		ps:      ps,
		env:     env,
		pos:     map[string]position{},
		bad:     map[string]bool{},
		anchors: map[string][]*ast.AnchorNode{},
		tasks:   tasks,
	}
	if root != nil {
		ast.Walk(anchorCollector(d.anchors), root)
	}
	return d
}

type anchorCollector map[string][]*ast.AnchorNode

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		name := an.Name.GetToken().Value
		a[name] = append(a[name], an)
	}
	return a
}

func (d *decoder) problem(at position, path, format string, args ...any) {
	d.ps.add(at, path, format, args...)
	d.bad[path] = true
}

// isBad reports whether path or one of its parents already has a problem,
// so that validation does not pile a second message on the same cause.
func (d *decoder) isBad(path string) bool {
	for {
		if d.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// at returns the position recorded for path, else for its closest parent
// that has one.
func (d *decoder) at(path string) position {
	for {
		if p, ok := d.pos[path]; ok {
			return p
		}
		if path == "" {
			return position{line: 1, col: 1}
		}
		path = parentPath(path)
	}
}

func (d *decoder) isSet(path string) bool {
	_, ok := d.pos[path]
	return ok
}

// decoded reports whether the key at path was written and its value, down
// to every entry of a list or map, decoded without problems: the keys a task
// block sets.
func (d *decoder) decoded(path string) bool {
	if !d.isSet(path) || d.isBad(path) {
		return false
	}
	for p := range d.bad {
		if len(p) > len(path) && strings.HasPrefix(p, path) && (p[len(path)] == '.' || p[len(path)] == '[') {
			return false
		}
	}
	return true
}

func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func tokenPos(n ast.Node) position {
	if n == nil {
		return position{}
	}
	var t = n.GetToken()
	switch x := n.(type) {
	case *ast.MappingNode:
		if len(x.Values) > 0 && x.Values[0].Key != nil {
			t = x.Values[0].Key.GetToken()
		} else {
			t = x.Start
		}
	case *ast.MappingValueNode:
		if x.Key != nil {
			t = x.Key.GetToken()
		}
	case *ast.SequenceNode:
		t = x.Start
	case *ast.AnchorNode:
		t = x.Start
	case *ast.AliasNode:
		t = x.Start
	case *ast.TagNode:
		t = x.Start
	}
	if t == nil || t.Position == nil {
		return position{}
	}
	return position{line: t.Position.Line, col: t.Position.Column}
}

func before(a, b position) bool {
	return a.line < b.line || a.line == b.line && a.col < b.col
}

// resolve looks through tags, anchors and aliases to the node that holds the
// value.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range 64 {
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			n = x.Value
		case *ast.AliasNode:
			name := ""
			if x.Value != nil {
				name = x.Value.GetToken().Value
			}
			var found *ast.AnchorNode
			at := tokenPos(x)
			for _, a := range d.anchors[name] {
				if before(tokenPos(a), at) {
					found = a // the latest definition before the alias wins
				}
			}
			if found == nil {
				return nil
			}
			n = found.Value
		default:
			return n
		}
	}
	return nil
}

func isNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// describe names a node for "(got ...)" in messages.
func describe(n ast.Node) string {
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	default:
		if s, ok := scalarText(x); ok {
			return strconv.Quote(s)
		}
		return x.Type().String()
	}
}

// scalarText returns a scalar's text as written (strings unquoted).
func scalarText(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		if x.Value == nil {
			return "", true
		}
		return x.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return x.GetToken().Value, true
	case *ast.MappingKeyNode:
		return scalarText(x.Value)
	}
	return "", false
}

func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch x := n.(type) {
	case *ast.MappingNode:
		return x.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{x}, true
	}
	return nil, false
}

type pair struct {
	key   string
	at    position
	value ast.Node
}

// pairs lists a mapping's entries with merge keys (<<) expanded: keys written
// in the mapping win over merged ones, and earlier merged mappings win over
// later ones.
func (d *decoder) pairs(path string, n ast.Node) ([]pair, bool) {
	vals, ok := mappingValues(n)
	if !ok {
		return nil, false
	}
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > 32 {
		d.problem(tokenPos(n), path, "merge keys nested too deeply")
		return nil, true
	}
	var explicit, merged []pair
	for _, mv := range vals {
		if mv.Key != nil && mv.Key.IsMergeKey() {
			src := d.resolve(mv.Value)
			srcs := []ast.Node{src}
			if seq, ok := src.(*ast.SequenceNode); ok {
				srcs = srcs[:0]
				for _, e := range seq.Values {
					srcs = append(srcs, d.resolve(e))
				}
			}
			for _, s := range srcs {
				ps, ok := d.pairs(path, s)
				if !ok {
					d.problem(tokenPos(mv.Key), path, "<< must merge a mapping or a list of mappings (got %s)", describe(s))
					continue
				}
				merged = append(merged, ps...)
			}
			continue
		}
		key, ok := scalarText(mv.Key)
		if !ok {
			d.problem(tokenPos(mv.Key), path, "keys must be plain strings (got %s)", describe(mv.Key))
			continue
		}
		explicit = append(explicit, pair{key: key, at: tokenPos(mv.Key), value: mv.Value})
	}
	have := map[string]bool{}
	for _, p := range explicit {
		have[p.key] = true
	}
	out := explicit
	for _, p := range merged {
		if !have[p.key] {
			have[p.key] = true
			out = append(out, p)
		}
	}
	return out, true
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	taskSetType         = reflect.TypeFor[TaskSet]()
)

// decode fills v (settable) from node n for the field at path; at is where
// problems about the value are reported. It reports whether the value was
// decoded without problems.
func (d *decoder) decode(path string, at position, n ast.Node, v reflect.Value) bool {
	n = d.resolve(n)
	if isNull(n) {
		t := v.Type()
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map, reflect.Slice, reflect.Struct:
			return true // an empty block: nothing set
		}
		d.problem(at, path, "missing value (expected %s)", want(v.Type()))
		return false
	}
	if v.Kind() == reflect.Pointer {
		nv := reflect.New(v.Type().Elem())
		ok := d.decode(path, at, n, nv.Elem())
		if ok || nv.Elem().Kind() == reflect.Struct {
			v.Set(nv)
		}
		return ok
	}
	if isText(v.Type()) {
		text, ok := d.scalar(path, at, n, v.Type())
		return ok && d.decodeText(path, at, text, v)
	}
	switch {
	case v.Kind() == reflect.Struct, v.Type() == taskSetType:
		return d.decodeStruct(path, at, n, v)
	}
	switch v.Kind() {
	case reflect.Map:
		return d.decodeMap(path, at, n, v)
	case reflect.Slice:
		return d.decodeSlice(path, at, n, v)
	}
	text, ok := d.scalar(path, at, n, v.Type())
	return ok && d.decodeText(path, at, text, v)
}

// isText reports whether a type parses itself from text (Size) or is a
// duration, rather than being a struct, map or plain kind.
func isText(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(textUnmarshalerType) || t == durationType
}

// decodeText parses a scalar's text into v (settable, not a pointer): the
// one place where a value's text becomes a duration, a Size, a bool or a
// number, for the YAML file and for table properties alike.
func (d *decoder) decodeText(path string, at position, text string, v reflect.Value) bool {
	if v.Type() == durationType {
		dur, err := ParseDuration(text)
		if err != nil {
			d.problem(at, path, "%v", err)
			return false
		}
		v.SetInt(int64(dur))
		return true
	}
	if isText(v.Type()) {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(text)); err != nil {
			d.problem(at, path, "%v", err)
			return false
		}
		return true
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Bool:
		switch strings.ToLower(text) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.problem(at, path, "must be true or false (got %q)", text)
			return false
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(text, 10, v.Type().Bits())
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				d.problem(at, path, "integer out of range (got %q)", text)
			} else {
				d.problem(at, path, "must be an integer (got %q)", text)
			}
			return false
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, v.Type().Bits())
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			d.problem(at, path, "must be a number (got %q)", text)
			return false
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("config: cannot decode into %s", v.Type()))
	}
	return true
}

// scalar returns the expanded text of a scalar node.
func (d *decoder) scalar(path string, at position, n ast.Node, t reflect.Type) (string, bool) {
	text, ok := scalarText(n)
	if !ok {
		d.problem(at, path, "must be %s (got %s)", want(t), describe(n))
		return "", false
	}
	text, err := expandEnv(text, d.env)
	if err != nil {
		d.problem(at, path, "%v", err)
		return "", false
	}
	return text, true
}

// want describes what a Go type expects, for messages.
func want(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Size]():
		return "a size such as 512MiB"
	case reflect.TypeFor[Duration](), durationType:
		return "a duration such as 30m or 5d"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return want(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}

// Field is one YAML key of a config struct; Index is for
// reflect.Type.FieldByIndex.
type Field struct {
	Name  string
	Index []int
	// Size is set by the tag option ",size": the int64 field is a byte
	// count, written as a Size (512MiB).
	Size bool
}

// Fields lists the YAML keys of a config struct type in declaration order,
// inline structs flattened, exactly as the decoder reads them (the docs'
// drift test walks the schema with it). The keys of an inline TaskSet are
// the registered tasks' (TaskBlocks), not listed here.
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || tag == "" && !f.Anonymous {
			continue
		}
		options := strings.Split(opts, ",")
		if slices.Contains(options, "inline") {
			if f.Type.Kind() == reflect.Struct {
				for _, sub := range Fields(f.Type) {
					sub.Index = append([]int{i}, sub.Index...)
					out = append(out, sub)
				}
			}
			continue
		}
		if name == "" {
			continue
		}
		size := slices.Contains(options, "size")
		if size && f.Type.Kind() != reflect.Int64 {
			panic(fmt.Sprintf("config: %s.%s has the size option but is a %s, not an int64", t, f.Name, f.Type))
		}
		out = append(out, Field{Name: name, Index: []int{i}, Size: size})
	}
	return out
}

// inlineTaskSet returns v's TaskSet field tagged `yaml:",inline"`, if any.
func inlineTaskSet(v reflect.Value) (reflect.Value, bool) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if _, opts, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.Type == taskSetType && slices.Contains(strings.Split(opts, ","), "inline") {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func (d *decoder) decodeStruct(path string, at position, n ast.Node, v reflect.Value) bool {
	ps, ok := d.pairs(path, n)
	if !ok {
		d.problem(at, path, "must be a mapping (got %s)", describe(n))
		return false
	}
	// v is a struct, maybe with an inline TaskSet, or a TaskSet itself.
	var fields []Field
	taskSet, hasTasks := v, true
	if v.Kind() == reflect.Struct {
		fields = Fields(v.Type())
		taskSet, hasTasks = inlineTaskSet(v)
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	if hasTasks {
		for _, t := range d.tasks {
			names = append(names, t.key)
		}
	}
	allOK := true
	for _, p := range ps {
		child := joinPath(path, p.key)
		i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == p.key })
		t := slices.IndexFunc(d.tasks, func(t task) bool { return t.key == p.key })
		ok := true
		switch {
		case i >= 0:
			d.pos[child] = p.at
			ok = d.decodeField(child, p, fields[i], v.FieldByIndex(fields[i].Index))
		case hasTasks && t >= 0:
			d.pos[child] = p.at
			ok = d.decodeBlock(child, p, d.tasks[t], taskSet)
		default:
			d.problem(p.at, child, "%s", unknownKey(p.key, names))
			ok = false
		}
		allOK = allOK && ok
	}
	return allOK
}

// decodeField decodes the value of one struct field.
func (d *decoder) decodeField(path string, p pair, f Field, v reflect.Value) bool {
	if !f.Size {
		return d.decode(path, p.at, p.value, v)
	}
	var s Size
	if !d.decode(path, p.at, p.value, reflect.ValueOf(&s).Elem()) {
		return false
	}
	v.SetInt(int64(s))
	return true
}

// decodeBlock decodes task t's block into a new Block of its Config and
// stores it in set. An empty block sets nothing and is not stored.
func (d *decoder) decodeBlock(path string, p pair, t task, set reflect.Value) bool {
	if isNull(d.resolve(p.value)) {
		return true
	}
	b := t.newBlock()
	ok := d.decode(path, p.at, p.value, b.Elem())
	if set.IsNil() {
		set.Set(reflect.MakeMap(taskSetType))
	}
	set.SetMapIndex(reflect.ValueOf(t.key), b)
	return ok
}

func unknownKey(key string, names []string) string {
	if best := nearest(key, names); best != "" {
		return fmt.Sprintf("unknown key (did you mean %q?)", best)
	}
	if len(names) == 0 {
		return "unknown key (nothing is allowed here)"
	}
	return "unknown key (allowed: " + strings.Join(names, ", ") + ")"
}

// nearest is the name of names closest to key, within an edit distance of
// two, or "".
func nearest(key string, names []string) string {
	best, bestDist := "", 3
	for _, name := range names {
		if dist := editDistance(key, name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (d *decoder) decodeMap(path string, at position, n ast.Node, v reflect.Value) bool {
	ps, ok := d.pairs(path, n)
	if !ok {
		d.problem(at, path, "must be a mapping (got %s)", describe(n))
		return false
	}
	if v.Type().Key().Kind() != reflect.String {
		panic("config: map keys must be strings")
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(ps)))
	}
	allOK := true
	for _, p := range ps {
		child := fmt.Sprintf("%s[%q]", path, p.key)
		d.pos[child] = p.at
		ev := reflect.New(v.Type().Elem()).Elem()
		if !d.decode(child, p.at, p.value, ev) {
			allOK = false
			continue
		}
		v.SetMapIndex(reflect.ValueOf(p.key).Convert(v.Type().Key()), ev)
	}
	return allOK
}

func (d *decoder) decodeSlice(path string, at position, n ast.Node, v reflect.Value) bool {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.problem(at, path, "must be a list (got %s)", describe(n))
		return false
	}
	out := reflect.MakeSlice(v.Type(), 0, len(seq.Values))
	allOK := true
	for i, e := range seq.Values {
		child := fmt.Sprintf("%s[%d]", path, i)
		epos := tokenPos(e)
		if !seq.IsFlowStyle && i < len(seq.Entries) && seq.Entries[i] != nil && seq.Entries[i].Start != nil && seq.Entries[i].Start.Position != nil {
			p := seq.Entries[i].Start.Position
			epos = position{line: p.Line, col: p.Column}
		}
		d.pos[child] = epos
		ev := reflect.New(v.Type().Elem()).Elem()
		if !d.decode(child, epos, e, ev) {
			allOK = false
		}
		// Keep failed elements so that indexes in later messages match the file.
		out = reflect.Append(out, ev)
	}
	v.Set(out)
	return allOK
}
