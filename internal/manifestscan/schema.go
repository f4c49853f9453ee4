package manifestscan

import (
	"container/list"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// The writer schema of a file is compiled once per distinct schema text
// (and set of wanted fields) into a program: one step per field, which
// captures the field into a record slot or skips its value by its type.
// Decoding 12.5 million manifest-list entries, or parsing the writer schema
// of 5,000 one-entry manifests, is most of the cost of orphan planning and
// expiry; a general decoder spends it building values nobody looks at.

// record holds the fields a program captured from one record. Byte slices
// point into the block buffer: valid until the next record.
type record struct {
	str [2][]byte
	num [numSlots]int64
	set uint32 // bit slot: num[slot] was present and not null; bit strBit+slot: str[slot]
}

const (
	numSlots = 14
	strBit   = 16
)

func (c *record) has(slot int) bool    { return c.set&(1<<slot) != 0 }
func (c *record) hasStr(slot int) bool { return c.set&(1<<(strBit+slot)) != 0 }

// fieldSpec says what to capture from a record field.
type fieldSpec struct {
	kind     captureKind
	slot     int
	required bool
	sub      map[string]fieldSpec // captureRecord
}

type captureKind uint8

const (
	captureString captureKind = iota + 1 // string, or a union of null and string
	captureLong                          // int or long, or a union of null and one
	captureRecord
)

// step reads (captures or skips) one value.
type step func(r *reader, c *record) error

// maxDepth bounds nesting, so a self-referencing schema cannot recurse
// without end.
const maxDepth = 64

// compile turns a writer schema into a program capturing spec.
func compile(schema []byte, spec map[string]fieldSpec) (step, error) {
	if len(schema) == 0 {
		return nil, fmt.Errorf("%w: the header has no avro.schema", ErrBadSchema)
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSchema, err)
	}
	c := schemaCompiler{named: map[string]any{}}
	c.register(root, "", 0)
	rec, ok := c.resolve(root, "")
	if !ok || !isRecord(rec) {
		return nil, fmt.Errorf("%w: the schema is not a record", ErrBadSchema)
	}
	return c.record(rec, "", spec, "", 0)
}

// programCache maps schema texts to their compiled programs, least
// recently used first out: a long-running server sees one schema text per
// table schema and partition spec, and must not keep every one it ever saw.
type programCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]*list.Element // schema text -> *cacheEntry
	order list.List                // front: most recently used
}

type cacheEntry struct {
	schema string
	progs  map[uint64]step // by specKey
}

func newProgramCache(max int) *programCache {
	return &programCache{max: max, m: map[string]*list.Element{}}
}

// programs is shared by every reader: a compiled program is a pure
// function of its schema text and wanted fields, like a pooled buffer it
// changes no result.
var programs = newProgramCache(64)

// program returns the cached program for schema and key, compiling it
// (outside the lock) with spec on a miss.
func (pc *programCache) program(schema []byte, key uint64, spec func() map[string]fieldSpec) (step, error) {
	pc.mu.Lock()
	if el, ok := pc.m[string(schema)]; ok {
		pc.order.MoveToFront(el)
		p := el.Value.(*cacheEntry).progs[key]
		pc.mu.Unlock()
		if p != nil {
			return p, nil
		}
	} else {
		pc.mu.Unlock()
	}
	p, err := compile(schema, spec())
	if err != nil {
		return nil, err
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	el, ok := pc.m[string(schema)]
	if !ok {
		el = pc.order.PushFront(&cacheEntry{schema: string(schema), progs: map[uint64]step{}})
		pc.m[string(schema)] = el
		for pc.order.Len() > pc.max {
			last := pc.order.Back()
			pc.order.Remove(last)
			delete(pc.m, last.Value.(*cacheEntry).schema)
		}
	}
	el.Value.(*cacheEntry).progs[key] = p
	return p, nil
}

// len is the number of schema texts held.
func (pc *programCache) len() int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.order.Len()
}

func isRecord(def map[string]any) bool { return def["type"] == "record" || def["type"] == "error" }

// schemaCompiler turns an Avro schema (as decoded JSON) into steps.
type schemaCompiler struct {
	named map[string]any // full and short name -> definition
}

func namespaceOf(def map[string]any, enclosing string) string {
	if name, ok := def["name"].(string); ok {
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			return name[:i]
		}
	}
	if ns, ok := def["namespace"].(string); ok {
		return ns
	}
	return enclosing
}

func fullName(name, ns string) string {
	if ns == "" || strings.Contains(name, ".") {
		return name
	}
	return ns + "." + name
}

// register records the named types defined in t, so that references by
// name resolve.
func (c *schemaCompiler) register(t any, ns string, depth int) {
	if depth > maxDepth {
		return // compiling fails on the depth too
	}
	switch v := t.(type) {
	case map[string]any:
		inner := namespaceOf(v, ns)
		switch v["type"] {
		case "record", "error", "enum", "fixed":
			if name, ok := v["name"].(string); ok {
				c.named[fullName(name, inner)] = v
				if _, dup := c.named[name]; !dup {
					c.named[name] = v
				}
			}
		}
		if fs, ok := v["fields"].([]any); ok {
			for _, f := range fs {
				if fm, ok := f.(map[string]any); ok {
					c.register(fm["type"], inner, depth+1)
				}
			}
		}
		for _, k := range []string{"items", "values", "type"} {
			if sub, ok := v[k]; ok {
				if _, isName := sub.(string); !isName {
					c.register(sub, inner, depth+1)
				}
			}
		}
	case []any:
		for _, b := range v {
			c.register(b, ns, depth+1)
		}
	}
}

// resolve follows a type name (or {"type": name}) to its definition.
func (c *schemaCompiler) resolve(t any, ns string) (map[string]any, bool) {
	switch v := t.(type) {
	case string:
		def, ok := c.named[fullName(v, ns)]
		if !ok {
			def, ok = c.named[v]
		}
		m, _ := def.(map[string]any)
		return m, ok && m != nil
	case map[string]any:
		if inner, ok := v["type"].(string); ok && !isComplexName(inner) {
			return c.resolve(inner, ns)
		}
		return v, true
	}
	return nil, false
}

func isComplexName(s string) bool {
	switch s {
	case "record", "error", "enum", "fixed", "array", "map":
		return true
	}
	return false
}

// primitive returns the primitive type name of t, bare or {"type": name}.
func primitive(t any) string {
	if m, ok := t.(map[string]any); ok {
		t = m["type"]
	}
	s, _ := t.(string)
	switch s {
	case "null", "boolean", "int", "long", "float", "double", "bytes", "string":
		return s
	}
	return ""
}

// record compiles a record that has fields to capture.
func (c *schemaCompiler) record(def map[string]any, ns string, spec map[string]fieldSpec, path string, depth int) (step, error) {
	inner := namespaceOf(def, ns)
	fields, _ := def["fields"].([]any)
	steps := make([]step, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		fm, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: a field of %s is not an object", ErrBadSchema, orRoot(path))
		}
		name, _ := fm["name"].(string)
		fs, want := spec[name]
		if !want {
			sk, err := c.skipper(fm["type"], inner, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%w: field %s%s: %v", ErrBadSchema, path, name, err)
			}
			steps = append(steps, sk)
			continue
		}
		seen[name] = true
		st, err := c.capture(fm["type"], inner, fs, path+name, depth+1)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	for name, fs := range spec {
		if fs.required && !seen[name] {
			return nil, fmt.Errorf("%w %s%s", ErrMissingField, path, name)
		}
	}
	return sequence(steps), nil
}

// sequence reads the fields of a record one after another.
func sequence(steps []step) step {
	return func(r *reader, c *record) error {
		for _, st := range steps {
			if err := st(r, c); err != nil {
				return err
			}
		}
		return nil
	}
}

func orRoot(path string) string {
	if path == "" {
		return "the record"
	}
	return strings.TrimSuffix(path, ".")
}

// optional splits t into its non-null type and the union branch that holds
// it: t itself (branch -1), or a union of null and one other type.
func optional(t any) (inner any, branch int, ok bool) {
	u, isUnion := t.([]any)
	if !isUnion {
		return t, -1, true
	}
	if len(u) != 2 {
		return nil, 0, false
	}
	for i, b := range u {
		if primitive(b) == "null" {
			return u[1-i], 1 - i, primitive(u[1-i]) != "null"
		}
	}
	return nil, 0, false
}

func (c *schemaCompiler) capture(t any, ns string, fs fieldSpec, what string, depth int) (step, error) {
	if fs.kind == captureRecord {
		def, ok := c.resolve(t, ns)
		if !ok || !isRecord(def) {
			return nil, fmt.Errorf("%w: %s is %v, not a record", ErrBadSchema, what, t)
		}
		if depth > maxDepth {
			return nil, fmt.Errorf("%w: %s nested too deep", ErrBadSchema, what)
		}
		return c.record(def, ns, fs.sub, what+".", depth)
	}
	if primitive(t) == "null" && !fs.required {
		return skipNothing, nil // declared but never set
	}
	inner, branch, ok := optional(t)
	var value step
	switch p := primitive(inner); {
	case ok && fs.kind == captureString && p == "string":
		bit := uint32(1) << (strBit + fs.slot)
		slot := fs.slot
		value = func(r *reader, c *record) error {
			b, err := r.bytes()
			c.str[slot] = b
			c.set |= bit
			return err
		}
	case ok && fs.kind == captureLong && (p == "int" || p == "long"):
		bit := uint32(1) << fs.slot
		slot := fs.slot
		value = func(r *reader, c *record) error {
			v, err := r.long()
			c.num[slot] = v
			c.set |= bit
			return err
		}
	default:
		want := map[captureKind]string{captureString: "a string", captureLong: "an int or long"}[fs.kind]
		return nil, fmt.Errorf("%w: %s is %v, not %s", ErrBadSchema, what, t, want)
	}
	if branch < 0 {
		return value, nil
	}
	// A null leaves no value from the record before.
	slot, isString := fs.slot, fs.kind == captureString
	return func(r *reader, c *record) error {
		i, err := r.long()
		if err != nil {
			return err
		}
		switch i {
		case int64(branch):
			return value(r, c)
		case int64(1 - branch):
			if isString {
				c.str[slot] = nil
			} else {
				c.num[slot] = 0
			}
			return nil
		}
		return fmt.Errorf("%w: %s: union branch %d out of range", ErrCorrupt, what, i)
	}, nil
}

func skipLong(r *reader, _ *record) error { _, err := r.long(); return err }

func skipBytes(r *reader, _ *record) error { _, err := r.bytes(); return err }

func skipFixed(n int64) step {
	return func(r *reader, _ *record) error { _, err := r.next(n); return err }
}

func skipNothing(*reader, *record) error { return nil }

// skipper compiles a step that skips one value of type t.
func (c *schemaCompiler) skipper(t any, ns string, depth int) (step, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("type nested too deep")
	}
	switch primitive(t) {
	case "null":
		return skipNothing, nil
	case "boolean":
		return skipFixed(1), nil
	case "int", "long":
		return skipLong, nil
	case "float":
		return skipFixed(4), nil
	case "double":
		return skipFixed(8), nil
	case "string", "bytes":
		return skipBytes, nil
	}
	if u, ok := t.([]any); ok { // union
		branches := make([]step, len(u))
		for i, b := range u {
			sk, err := c.skipper(b, ns, depth+1)
			if err != nil {
				return nil, err
			}
			branches[i] = sk
		}
		return func(r *reader, cp *record) error {
			i, err := r.long()
			if err != nil {
				return err
			}
			if i < 0 || i >= int64(len(branches)) {
				return fmt.Errorf("%w: union branch %d out of range", ErrCorrupt, i)
			}
			return branches[i](r, cp)
		}, nil
	}
	def, ok := c.resolve(t, ns)
	if !ok {
		return nil, fmt.Errorf("unknown type %v", t)
	}
	inner := namespaceOf(def, ns)
	switch def["type"] {
	case "record", "error":
		fs, _ := def["fields"].([]any)
		skips := make([]step, 0, len(fs))
		for _, f := range fs {
			fm, ok := f.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("bad record field")
			}
			sk, err := c.skipper(fm["type"], inner, depth+1)
			if err != nil {
				return nil, err
			}
			skips = append(skips, sk)
		}
		return sequence(skips), nil
	case "enum":
		return skipLong, nil
	case "fixed":
		size, ok := def["size"].(float64)
		if !ok || size < 0 {
			return nil, fmt.Errorf("fixed type without a size")
		}
		return skipFixed(int64(size)), nil
	case "array", "map":
		key := "items"
		if def["type"] == "map" {
			key = "values"
		}
		item, err := c.skipper(def[key], inner, depth+1)
		if err != nil {
			return nil, err
		}
		isMap := def["type"] == "map"
		return func(r *reader, cp *record) error {
			for {
				n, err := r.long()
				if err != nil {
					return err
				}
				if n == 0 {
					return nil
				}
				if n < 0 { // a block that states its byte size: skip it whole
					size, err := r.long()
					if err != nil {
						return err
					}
					if _, err := r.next(size); err != nil {
						return err
					}
					continue
				}
				for range n {
					if isMap {
						if err := skipBytes(r, cp); err != nil {
							return err
						}
					}
					if err := item(r, cp); err != nil {
						return err
					}
				}
			}
		}, nil
	}
	return nil, fmt.Errorf("unsupported type %v", t)
}
