package resttest

// Checks of request and response bodies against the schemas of the Iceberg
// REST OpenAPI spec (open-api/rest-catalog-open-api.yaml, components.schemas),
// for the types the served endpoints use: required fields, JSON types and
// enum values, written out by hand from the spec. Each check walks a body
// decoded with json.Decoder.UseNumber, so integers are told from floats.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// checker collects the violations found in one body, each with the JSON
// path where it was found ("$.metadata.snapshots[3].summary").
type checker struct {
	problems []string
}

func (c *checker) fail(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// object returns v as an object, and requires the given fields in it.
func (c *checker) object(path string, v any, required ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "want an object, got %s", kind(v))
		return nil
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			c.fail(path, "required field %q is missing", k)
		}
	}
	return m
}

// field runs check on m[key] when the field is present.
func field(m map[string]any, path, key string, check func(path string, v any)) {
	if v, ok := m[key]; ok {
		check(path+"."+key, v)
	}
}

func (c *checker) str(path string, v any) {
	if _, ok := v.(string); !ok {
		c.fail(path, "want a string, got %s", kind(v))
	}
}

// nullableStr accepts a string or null.
func (c *checker) nullableStr(path string, v any) {
	if v != nil {
		c.str(path, v)
	}
}

func (c *checker) integer(path string, v any) {
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "want an integer, got %s", kind(v))
		return
	}
	if _, err := n.Int64(); err != nil {
		c.fail(path, "want an integer, got %s", n)
	}
}

// nullableInt accepts an integer or null.
func (c *checker) nullableInt(path string, v any) {
	if v != nil {
		c.integer(path, v)
	}
}

// intRange is an integer in [lo, hi].
func (c *checker) intRange(lo, hi int64) func(string, any) {
	return func(path string, v any) {
		c.integer(path, v)
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil && (i < lo || i > hi) {
				c.fail(path, "%d is outside [%d, %d]", i, lo, hi)
			}
		}
	}
}

func (c *checker) boolean(path string, v any) {
	if _, ok := v.(bool); !ok {
		c.fail(path, "want a boolean, got %s", kind(v))
	}
}

// enum is a string, one of values.
func (c *checker) enum(values ...string) func(string, any) {
	return func(path string, v any) {
		s, ok := v.(string)
		if !ok {
			c.fail(path, "want a string, got %s", kind(v))
			return
		}
		if !slices.Contains(values, s) {
			c.fail(path, "%q is not one of %s", s, strings.Join(values, ", "))
		}
	}
}

// array is a JSON array whose items each pass item.
func (c *checker) array(item func(string, any)) func(string, any) {
	return func(path string, v any) {
		a, ok := v.([]any)
		if !ok {
			c.fail(path, "want an array, got %s", kind(v))
			return
		}
		for i, x := range a {
			item(fmt.Sprintf("%s[%d]", path, i), x)
		}
	}
}

// stringMap is an object whose values are strings (additionalProperties:
// {type: string}).
func (c *checker) stringMap(path string, v any) {
	m := c.object(path, v)
	for k, x := range m {
		c.str(path+"."+k, x)
	}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// ---------------------------------------------------------------------------
// Schemas of the spec, one function each.

// ErrorModel / IcebergErrorResponse (additionalProperties: false).
func (c *checker) errorResponse(path string, v any) {
	m := c.object(path, v, "error")
	for k := range m {
		if k != "error" {
			c.fail(path, "unexpected field %q (additionalProperties: false)", k)
		}
	}
	field(m, path, "error", func(p string, v any) {
		e := c.object(p, v, "message", "type", "code")
		field(e, p, "message", c.str)
		field(e, p, "type", c.str)
		field(e, p, "code", c.intRange(400, 600))
		field(e, p, "stack", c.array(c.str))
	})
}

// OAuthError.
func (c *checker) oauthError(path string, v any) {
	m := c.object(path, v, "error")
	field(m, path, "error", c.enum("invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
		"unsupported_grant_type", "invalid_scope"))
	field(m, path, "error_description", c.str)
	field(m, path, "error_uri", c.str)
}

var tokenTypes = []string{
	"urn:ietf:params:oauth:token-type:access_token", "urn:ietf:params:oauth:token-type:refresh_token",
	"urn:ietf:params:oauth:token-type:id_token", "urn:ietf:params:oauth:token-type:saml1",
	"urn:ietf:params:oauth:token-type:saml2", "urn:ietf:params:oauth:token-type:jwt",
}

// OAuthTokenResponse.
func (c *checker) oauthTokenResponse(path string, v any) {
	m := c.object(path, v, "access_token", "token_type")
	field(m, path, "access_token", c.str)
	field(m, path, "token_type", c.enum("bearer", "mac", "N_A"))
	field(m, path, "expires_in", c.integer)
	field(m, path, "issued_token_type", c.enum(tokenTypes...))
	field(m, path, "refresh_token", c.str)
	field(m, path, "scope", c.str)
}

// CatalogConfig.
func (c *checker) catalogConfig(path string, v any) {
	m := c.object(path, v, "defaults", "overrides")
	field(m, path, "defaults", c.stringMap)
	field(m, path, "overrides", c.stringMap)
	field(m, path, "endpoints", c.array(func(p string, v any) {
		c.str(p, v)
		if s, ok := v.(string); ok {
			if verb, route, ok := strings.Cut(s, " "); !ok || verb == "" || !strings.HasPrefix(route, "/v1/") {
				c.fail(p, "%q is not \"<HTTP verb> <resource path>\"", s)
			}
		}
	}))
	field(m, path, "idempotency-key-lifetime", c.str)
}

// Namespace.
func (c *checker) namespace(path string, v any) { c.array(c.str)(path, v) }

// TableIdentifier.
func (c *checker) tableIdentifier(path string, v any) {
	m := c.object(path, v, "namespace", "name")
	field(m, path, "namespace", c.namespace)
	field(m, path, "name", c.str)
}

// ListNamespacesResponse.
func (c *checker) listNamespacesResponse(path string, v any) {
	m := c.object(path, v)
	field(m, path, "next-page-token", c.nullableStr)
	field(m, path, "namespaces", c.array(c.namespace))
}

// GetNamespaceResponse.
func (c *checker) getNamespaceResponse(path string, v any) {
	m := c.object(path, v, "namespace")
	field(m, path, "namespace", c.namespace)
	field(m, path, "properties", func(p string, v any) {
		if v != nil {
			c.stringMap(p, v)
		}
	})
}

// ListTablesResponse.
func (c *checker) listTablesResponse(path string, v any) {
	m := c.object(path, v)
	field(m, path, "next-page-token", c.nullableStr)
	field(m, path, "identifiers", c.array(c.tableIdentifier))
}

// LoadTableResult.
func (c *checker) loadTableResult(path string, v any) {
	m := c.object(path, v, "metadata")
	field(m, path, "metadata-location", c.nullableStr)
	field(m, path, "metadata", c.tableMetadata)
	field(m, path, "config", c.stringMap)
	field(m, path, "storage-credentials", c.array(func(p string, v any) {
		sc := c.object(p, v, "prefix", "config")
		field(sc, p, "prefix", c.str)
		field(sc, p, "config", c.stringMap)
	}))
}

// CommitTableResponse.
func (c *checker) commitTableResponse(path string, v any) {
	m := c.object(path, v, "metadata-location", "metadata")
	field(m, path, "metadata-location", c.str)
	field(m, path, "metadata", c.tableMetadata)
}

// TableMetadata.
func (c *checker) tableMetadata(path string, v any) {
	m := c.object(path, v, "format-version", "table-uuid")
	field(m, path, "format-version", c.intRange(1, 3))
	field(m, path, "table-uuid", c.str)
	field(m, path, "location", c.str)
	for _, k := range []string{"last-updated-ms", "next-row-id", "current-schema-id", "last-column-id",
		"default-spec-id", "last-partition-id", "default-sort-order-id", "last-sequence-number"} {
		field(m, path, k, c.integer)
	}
	// -1 (or null in older writers) means no current snapshot.
	field(m, path, "current-snapshot-id", c.nullableInt)
	field(m, path, "properties", c.stringMap)
	field(m, path, "schemas", c.array(c.schema))
	field(m, path, "partition-specs", c.array(c.partitionSpec))
	field(m, path, "sort-orders", c.array(c.sortOrder))
	field(m, path, "snapshots", c.array(c.snapshot))
	field(m, path, "refs", func(p string, v any) {
		for name, ref := range c.object(p, v) {
			c.snapshotReference(p+"."+name, ref)
		}
	})
	field(m, path, "snapshot-log", c.array(func(p string, v any) {
		e := c.object(p, v, "snapshot-id", "timestamp-ms")
		field(e, p, "snapshot-id", c.integer)
		field(e, p, "timestamp-ms", c.integer)
	}))
	field(m, path, "metadata-log", c.array(func(p string, v any) {
		e := c.object(p, v, "metadata-file", "timestamp-ms")
		field(e, p, "metadata-file", c.str)
		field(e, p, "timestamp-ms", c.integer)
	}))
	field(m, path, "statistics", c.array(c.statisticsFile))
	field(m, path, "partition-statistics", c.array(c.partitionStatisticsFile))
	field(m, path, "encryption-keys", c.array(c.encryptedKey))
}

// Schema: a StructType with schema-id and identifier-field-ids.
func (c *checker) schema(path string, v any) {
	m := c.structType(path, v)
	field(m, path, "schema-id", c.integer)
	field(m, path, "identifier-field-ids", c.array(c.integer))
}

// StructType.
func (c *checker) structType(path string, v any) map[string]any {
	m := c.object(path, v, "type", "fields")
	field(m, path, "type", c.enum("struct"))
	field(m, path, "fields", c.array(func(p string, v any) {
		f := c.object(p, v, "id", "name", "type", "required")
		field(f, p, "id", c.integer)
		field(f, p, "name", c.str)
		field(f, p, "type", c.typ)
		field(f, p, "required", c.boolean)
		field(f, p, "doc", c.str)
	}))
	return m
}

// Type: a PrimitiveType (a string), StructType, ListType or MapType.
func (c *checker) typ(path string, v any) {
	if _, ok := v.(string); ok {
		return
	}
	m := c.object(path, v, "type")
	switch m["type"] {
	case "struct":
		c.structType(path, v)
	case "list":
		c.object(path, v, "element-id", "element", "element-required")
		field(m, path, "element-id", c.integer)
		field(m, path, "element", c.typ)
		field(m, path, "element-required", c.boolean)
	case "map":
		c.object(path, v, "key-id", "key", "value-id", "value", "value-required")
		field(m, path, "key-id", c.integer)
		field(m, path, "key", c.typ)
		field(m, path, "value-id", c.integer)
		field(m, path, "value", c.typ)
		field(m, path, "value-required", c.boolean)
	default:
		c.fail(path+".type", "%v is not struct, list or map", m["type"])
	}
}

// PartitionSpec.
func (c *checker) partitionSpec(path string, v any) {
	m := c.object(path, v, "fields")
	field(m, path, "spec-id", c.integer)
	field(m, path, "fields", c.array(func(p string, v any) {
		f := c.object(p, v, "source-id", "transform", "name")
		field(f, p, "field-id", c.integer)
		field(f, p, "source-id", c.integer)
		field(f, p, "name", c.str)
		field(f, p, "transform", c.str)
	}))
}

// SortOrder.
func (c *checker) sortOrder(path string, v any) {
	m := c.object(path, v, "order-id", "fields")
	field(m, path, "order-id", c.integer)
	field(m, path, "fields", c.array(func(p string, v any) {
		f := c.object(p, v, "source-id", "transform", "direction", "null-order")
		field(f, p, "source-id", c.integer)
		field(f, p, "transform", c.str)
		field(f, p, "direction", c.enum("asc", "desc"))
		field(f, p, "null-order", c.enum("nulls-first", "nulls-last"))
	}))
}

// Snapshot.
func (c *checker) snapshot(path string, v any) {
	m := c.object(path, v, "snapshot-id", "timestamp-ms", "manifest-list", "summary")
	for _, k := range []string{"snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms",
		"first-row-id", "added-rows", "schema-id"} {
		field(m, path, k, c.integer)
	}
	field(m, path, "manifest-list", c.str)
	field(m, path, "summary", func(p string, v any) {
		s := c.object(p, v, "operation")
		field(s, p, "operation", c.enum("append", "replace", "overwrite", "delete"))
		for k, x := range s {
			c.str(p+"."+k, x)
		}
	})
}

// SnapshotReference.
func (c *checker) snapshotReference(path string, v any) {
	m := c.object(path, v, "type", "snapshot-id")
	field(m, path, "type", c.enum("tag", "branch"))
	for _, k := range []string{"snapshot-id", "max-ref-age-ms", "max-snapshot-age-ms", "min-snapshots-to-keep"} {
		field(m, path, k, c.integer)
	}
}

// StatisticsFile.
func (c *checker) statisticsFile(path string, v any) {
	m := c.object(path, v, "snapshot-id", "statistics-path", "file-size-in-bytes", "file-footer-size-in-bytes", "blob-metadata")
	field(m, path, "snapshot-id", c.integer)
	field(m, path, "statistics-path", c.str)
	field(m, path, "file-size-in-bytes", c.integer)
	field(m, path, "file-footer-size-in-bytes", c.integer)
	field(m, path, "blob-metadata", c.array(func(p string, v any) {
		b := c.object(p, v, "type", "snapshot-id", "sequence-number", "fields")
		field(b, p, "type", c.str)
		field(b, p, "snapshot-id", c.integer)
		field(b, p, "sequence-number", c.integer)
		field(b, p, "fields", c.array(c.integer))
		field(b, p, "properties", c.stringMap)
	}))
}

// PartitionStatisticsFile.
func (c *checker) partitionStatisticsFile(path string, v any) {
	m := c.object(path, v, "snapshot-id", "statistics-path", "file-size-in-bytes")
	field(m, path, "snapshot-id", c.integer)
	field(m, path, "statistics-path", c.str)
	field(m, path, "file-size-in-bytes", c.integer)
}

// EncryptedKey.
func (c *checker) encryptedKey(path string, v any) {
	m := c.object(path, v, "key-id", "encrypted-key-metadata")
	field(m, path, "key-id", c.str)
	field(m, path, "encrypted-key-metadata", c.str)
	field(m, path, "encrypted-by-id", c.str)
	field(m, path, "properties", c.stringMap)
}

// CommitTableRequest.
func (c *checker) commitTableRequest(path string, v any) {
	m := c.object(path, v, "requirements", "updates")
	field(m, path, "identifier", c.tableIdentifier)
	field(m, path, "requirements", c.array(c.tableRequirement))
	field(m, path, "updates", c.array(c.tableUpdate))
}

// requirementFields are the fields each TableRequirement type requires
// beyond "type", with their checks; the spec's discriminator mapping.
func (c *checker) requirementFields(typ string) (map[string]func(string, any), bool) {
	f, ok := map[string]map[string]func(string, any){
		"assert-create":                     {},
		"assert-table-uuid":                 {"uuid": c.str},
		"assert-ref-snapshot-id":            {"ref": c.str, "snapshot-id": c.nullableInt},
		"assert-last-assigned-field-id":     {"last-assigned-field-id": c.integer},
		"assert-current-schema-id":          {"current-schema-id": c.integer},
		"assert-last-assigned-partition-id": {"last-assigned-partition-id": c.integer},
		"assert-default-spec-id":            {"default-spec-id": c.integer},
		"assert-default-sort-order-id":      {"default-sort-order-id": c.integer},
	}[typ]
	return f, ok
}

// TableRequirement, by its discriminator "type".
func (c *checker) tableRequirement(path string, v any) {
	m := c.object(path, v, "type")
	typ, _ := m["type"].(string)
	fields, ok := c.requirementFields(typ)
	if !ok {
		c.fail(path+".type", "unknown requirement type %v", m["type"])
		return
	}
	for k, check := range fields {
		if _, present := m[k]; !present {
			c.fail(path, "%s requires field %q", typ, k)
			continue
		}
		check(path+"."+k, m[k])
	}
}

// TableUpdate, by its discriminator "action": the required fields of each
// update type and the checks of the fields it may carry.
func (c *checker) tableUpdate(path string, v any) {
	m := c.object(path, v, "action")
	action, _ := m["action"].(string)
	type spec struct {
		required []string
		fields   map[string]func(string, any)
	}
	specs := map[string]spec{
		"assign-uuid":            {[]string{"uuid"}, map[string]func(string, any){"uuid": c.str}},
		"upgrade-format-version": {[]string{"format-version"}, map[string]func(string, any){"format-version": c.integer}},
		"add-schema": {[]string{"schema"}, map[string]func(string, any){
			"schema": func(p string, v any) { c.schema(p, v) }, "last-column-id": c.integer}},
		"set-current-schema":     {[]string{"schema-id"}, map[string]func(string, any){"schema-id": c.integer}},
		"add-spec":               {[]string{"spec"}, map[string]func(string, any){"spec": c.partitionSpec}},
		"set-default-spec":       {[]string{"spec-id"}, map[string]func(string, any){"spec-id": c.integer}},
		"add-sort-order":         {[]string{"sort-order"}, map[string]func(string, any){"sort-order": c.sortOrder}},
		"set-default-sort-order": {[]string{"sort-order-id"}, map[string]func(string, any){"sort-order-id": c.integer}},
		"add-snapshot":           {[]string{"snapshot"}, map[string]func(string, any){"snapshot": c.snapshot}},
		"set-snapshot-ref": {[]string{"ref-name", "type", "snapshot-id"}, map[string]func(string, any){
			"ref-name": c.str, "type": c.enum("tag", "branch"), "snapshot-id": c.integer,
			"max-ref-age-ms": c.integer, "max-snapshot-age-ms": c.integer, "min-snapshots-to-keep": c.integer}},
		"remove-snapshots":            {[]string{"snapshot-ids"}, map[string]func(string, any){"snapshot-ids": c.array(c.integer)}},
		"remove-snapshot-ref":         {[]string{"ref-name"}, map[string]func(string, any){"ref-name": c.str}},
		"set-location":                {[]string{"location"}, map[string]func(string, any){"location": c.str}},
		"set-properties":              {[]string{"updates"}, map[string]func(string, any){"updates": c.stringMap}},
		"remove-properties":           {[]string{"removals"}, map[string]func(string, any){"removals": c.array(c.str)}},
		"set-statistics":              {[]string{"statistics"}, map[string]func(string, any){"statistics": c.statisticsFile, "snapshot-id": c.integer}},
		"remove-statistics":           {[]string{"snapshot-id"}, map[string]func(string, any){"snapshot-id": c.integer}},
		"set-partition-statistics":    {[]string{"partition-statistics"}, map[string]func(string, any){"partition-statistics": c.partitionStatisticsFile}},
		"remove-partition-statistics": {[]string{"snapshot-id"}, map[string]func(string, any){"snapshot-id": c.integer}},
		"remove-partition-specs":      {[]string{"spec-ids"}, map[string]func(string, any){"spec-ids": c.array(c.integer)}},
		"remove-schemas":              {[]string{"schema-ids"}, map[string]func(string, any){"schema-ids": c.array(c.integer)}},
		"add-encryption-key":          {[]string{"encryption-key"}, map[string]func(string, any){"encryption-key": c.encryptedKey}},
		"remove-encryption-key":       {[]string{"key-id"}, map[string]func(string, any){"key-id": c.str}},
	}
	s, ok := specs[action]
	if !ok {
		c.fail(path+".action", "unknown update action %v", m["action"])
		return
	}
	c.object(path, v, s.required...)
	for k, check := range s.fields {
		field(m, path, k, check)
	}
}
