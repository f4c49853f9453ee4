package verify

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// tableMetadata is the part of an Iceberg table metadata file the verifier
// reads. Ids are json.Number: snapshot ids exceed 2^53.
type tableMetadata struct {
	FormatVersion     int               `json:"format-version"`
	Location          string            `json:"location"`
	CurrentSnapshotID *json.Number      `json:"current-snapshot-id"`
	Refs              map[string]ref    `json:"refs"`
	Snapshots         []snapshot        `json:"snapshots"`
	CurrentSchemaID   *int              `json:"current-schema-id"`
	Schemas           []schema          `json:"schemas"`
	Schema            *schema           `json:"schema"` // v1
	PartitionSpecs    []partitionSpec   `json:"partition-specs"`
	PartitionSpec     []partitionField  `json:"partition-spec"` // v1
	Properties        map[string]string `json:"properties"`
}

type ref struct {
	SnapshotID json.Number `json:"snapshot-id"`
}

type snapshot struct {
	SnapshotID   json.Number `json:"snapshot-id"`
	ManifestList string      `json:"manifest-list"`
	Manifests    []string    `json:"manifests"` // v1 snapshots without a manifest list
}

type schema struct {
	SchemaID int     `json:"schema-id"`
	Fields   []field `json:"fields"`
}

type field struct {
	ID             int             `json:"id"`
	Name           string          `json:"name"`
	Type           icebergType     `json:"type"`
	InitialDefault json.RawMessage `json:"initial-default"`
}

type partitionSpec struct {
	SpecID int              `json:"spec-id"`
	Fields []partitionField `json:"fields"`
}

type partitionField struct {
	SourceID  int    `json:"source-id"`
	Transform string `json:"transform"`
	Name      string `json:"name"`
}

// icebergType is a primitive type name ("long", "decimal(9,2)") or a
// struct, list or map.
type icebergType struct {
	Primitive string
	Kind      string // "struct", "list" or "map" when Primitive is ""
	Fields    []field
	Element   *icebergType
	Key       *icebergType
	Value     *icebergType
}

func (t *icebergType) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.Primitive)
	}
	var nested struct {
		Type    string       `json:"type"`
		Fields  []field      `json:"fields"`
		Element *icebergType `json:"element"`
		Key     *icebergType `json:"key"`
		Value   *icebergType `json:"value"`
	}
	if err := json.Unmarshal(b, &nested); err != nil {
		return err
	}
	*t = icebergType{Kind: nested.Type, Fields: nested.Fields, Element: nested.Element, Key: nested.Key, Value: nested.Value}
	return nil
}

func (t *icebergType) String() string {
	if t.Primitive != "" {
		return t.Primitive
	}
	return t.Kind
}

// snapshotID parses a snapshot id.
func parseID(n json.Number) (int64, error) {
	return strconv.ParseInt(n.String(), 10, 64)
}

func (m *tableMetadata) schemaByID(id int) *schema {
	for i := range m.Schemas {
		if m.Schemas[i].SchemaID == id {
			return &m.Schemas[i]
		}
	}
	return m.Schema
}

// currentSchemaID is current-schema-id, else the v1 schema's id, else 0.
func (m *tableMetadata) currentSchemaID() int {
	switch {
	case m.CurrentSchemaID != nil:
		return *m.CurrentSchemaID
	case m.Schema != nil:
		return m.Schema.SchemaID
	}
	return 0
}

// fieldsByID maps every field id of every schema to its definition, the
// current schema's first (descending into structs only, like the checksum).
func (m *tableMetadata) fieldsByID(current *schema) map[int]*field {
	out := map[int]*field{}
	var visit func(fields []field)
	visit = func(fields []field) {
		for i := range fields {
			f := &fields[i]
			if _, ok := out[f.ID]; !ok {
				out[f.ID] = f
			}
			if f.Type.Kind == "struct" {
				visit(f.Type.Fields)
			}
		}
	}
	visit(current.Fields)
	for i := range m.Schemas {
		visit(m.Schemas[i].Fields)
	}
	return out
}

func (m *tableMetadata) spec(id int) *partitionSpec {
	for i := range m.PartitionSpecs {
		if m.PartitionSpecs[i].SpecID == id {
			return &m.PartitionSpecs[i]
		}
	}
	return nil
}

// unpartitioned reports whether spec id has no fields (an unknown spec
// counts as unpartitioned). Equality deletes of such a spec apply to every
// data file.
func (m *tableMetadata) unpartitioned(id int) bool {
	if m.PartitionSpecs == nil {
		return len(m.PartitionSpec) == 0
	}
	s := m.spec(id)
	return s == nil || len(s.Fields) == 0
}

// nameMapping returns schema.name-mapping.default as field id -> names.
func (m *tableMetadata) nameMapping() (map[int][]string, error) {
	text, ok := m.Properties["schema.name-mapping.default"]
	if !ok {
		return nil, nil
	}
	type entry struct {
		FieldID *int     `json:"field-id"`
		Names   []string `json:"names"`
		Fields  []entry  `json:"fields"`
	}
	var entries []entry
	if err := json.Unmarshal([]byte(text), &entries); err != nil {
		return nil, fmt.Errorf("parse schema.name-mapping.default: %w", err)
	}
	out := map[int][]string{}
	var walk func([]entry)
	walk = func(es []entry) {
		for _, e := range es {
			if e.FieldID != nil {
				out[*e.FieldID] = e.Names
			}
			walk(e.Fields)
		}
	}
	walk(entries)
	return out, nil
}

func readMetadata(file string) (*tableMetadata, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gunzip %s: %w", file, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gunzip %s: %w", file, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m tableMetadata
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	if m.FormatVersion == 0 {
		m.FormatVersion = 1
	}
	return &m, nil
}

var (
	hadoopVersion   = regexp.MustCompile(`^v(\d+)(\.gz)?\.metadata\.json(\.gz)?$`)
	numberedVersion = regexp.MustCompile(`^(\d+)-.*\.metadata\.json(\.gz)?$`)
)

func metadataVersion(name string) int {
	for _, re := range []*regexp.Regexp{hadoopVersion, numberedVersion} {
		if m := re.FindStringSubmatch(name); m != nil {
			v, _ := strconv.Atoi(m[1])
			return v
		}
	}
	return -1
}

// MetadataFile returns the metadata file of target: target itself when it is
// a file; else, in its metadata/ folder (or target when it is that folder),
// the one the version hint names, else the highest version (the newest file
// among equal versions).
func MetadataFile(target string) (string, error) {
	target, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return "", err
	}
	if fi.Mode().IsRegular() {
		return target, nil
	}
	dir := filepath.Join(target, "metadata")
	if _, err := os.Stat(dir); err != nil && filepath.Base(target) == "metadata" {
		dir = target
	}
	for _, hint := range []string{"version-hint.text", "version-hint.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, hint))
		v := strings.TrimSpace(string(b))
		if err != nil || v == "" {
			continue
		}
		for _, name := range []string{"v" + v + ".metadata.json", "v" + v + ".gz.metadata.json", "v" + v + ".metadata.json.gz", v + ".metadata.json", v} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
				return filepath.Join(dir, name), nil
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	type candidate struct {
		name    string
		version int
		mtime   int64
	}
	var files []candidate
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".metadata.json") || strings.HasSuffix(e.Name(), ".metadata.json.gz") {
			c := candidate{name: e.Name(), version: metadataVersion(e.Name())}
			if info, err := e.Info(); err == nil {
				c.mtime = info.ModTime().UnixNano()
			}
			files = append(files, c)
		}
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no *.metadata.json in %s", dir)
	}
	best := slices.MaxFunc(files, func(a, b candidate) int {
		if a.version != b.version {
			return a.version - b.version
		}
		return int(a.mtime - b.mtime)
	})
	return filepath.Join(dir, best.name), nil
}

// resolver maps the locations in a table's metadata (s3://..., hdfs://...,
// /abs, relative/path, file:/...) to local files: a location under a known
// prefix (the table's location, in any spelling, and the caller's mappings)
// maps to the same relative path under that prefix's local folder.
type resolver struct {
	maps [][2]string // prefix, local folder
}

func newResolver(tableDir, location string, extra [][2]string) (*resolver, error) {
	r := &resolver{}
	for _, m := range extra {
		to, err := filepath.Abs(m[1])
		if err != nil {
			return nil, err
		}
		r.maps = append(r.maps, [2]string{m[0], to})
	}
	if location != "" {
		r.maps = append(r.maps, [2]string{location, tableDir})
	}
	return r, nil
}

var schemeAuthorityPath = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*(/.*)?$`)

func stripFileScheme(p string) string {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		if after, ok := strings.CutPrefix(rest, "localhost"); ok && strings.HasPrefix(after, "/") {
			return after
		}
		return rest
	}
	if rest, ok := strings.CutPrefix(p, "file:"); ok {
		return rest
	}
	return p
}

func stripSchemeAuthority(p string) string {
	if m := schemeAuthorityPath.FindStringSubmatch(p); m != nil {
		if m[1] == "" {
			return "/"
		}
		return m[1]
	}
	return stripFileScheme(p)
}

var repeatedSlashes = regexp.MustCompile(`/+`)

// normRel drops leading "./", repeated and trailing slashes.
func normRel(p string) string {
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	return strings.TrimSuffix(repeatedSlashes.ReplaceAllString(p, "/"), "/")
}

func (r *resolver) resolve(p string) (string, error) {
	var tried []string
	for _, m := range r.maps {
		from, to := m[0], m[1]
		for _, pair := range [][2]string{
			{p, from},
			{stripFileScheme(p), stripFileScheme(from)},
			{stripSchemeAuthority(p), stripSchemeAuthority(from)},
			{normRel(stripFileScheme(p)), normRel(stripFileScheme(from))},
		} {
			q, prefix := normRel(pair[0]), normRel(pair[1])
			if prefix == "" {
				continue
			}
			if q == prefix {
				return to, nil
			}
			if rest, ok := strings.CutPrefix(q, prefix+"/"); ok {
				return filepath.Join(to, filepath.FromSlash(rest)), nil
			}
			if !slices.Contains(tried, prefix) {
				tried = append(tried, prefix)
			}
		}
	}
	if local := stripFileScheme(p); filepath.IsAbs(local) {
		if _, err := os.Stat(local); err == nil {
			return local, nil
		}
	}
	return "", fmt.Errorf("cannot map location %s to a local file (table location prefixes tried: %s); map it with MapLocation",
		p, strings.Join(tried, ", "))
}

// key is what position deletes are matched on: the local file, or the
// location itself when it maps to none.
func (r *resolver) key(p string) string {
	if local, err := r.resolve(p); err == nil {
		return local
	}
	return p
}
