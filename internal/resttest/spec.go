package resttest

// Checks of request and response bodies against the schemas of the Iceberg
// REST OpenAPI spec (open-api/rest-catalog-open-api.yaml, components.schemas),
// for the types the served endpoints use: required fields, JSON types and
// enum values, written out by hand from the spec. Each check walks a body
// decoded with json.Decoder.UseNumber, so integers are told from floats.

import (
	"encoding/json"
	"fmt"
	"maps"
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

// props are the properties of an object schema with the check of each.
type props map[string]func(string, any)

// obj checks an object schema: its required fields and the properties
// present, in name order so that problems come in a stable order.
func (c *checker) obj(path string, v any, required []string, ps props) map[string]any {
	m := c.object(path, v, required...)
	for _, k := range slices.Sorted(maps.Keys(ps)) {
		field(m, path, k, ps[k])
	}
	return m
}

// req lists required fields.
func req(fields ...string) []string { return fields }

// ---------------------------------------------------------------------------
// Schemas of the spec, one function each.

// ErrorModel / IcebergErrorResponse (additionalProperties: false).
func (c *checker) errorResponse(path string, v any) {
	m := c.obj(path, v, req("error"), props{"error": func(p string, v any) {
		c.obj(p, v, req("message", "type", "code"), props{
			"message": c.str, "type": c.str, "code": c.intRange(400, 600), "stack": c.array(c.str),
		})
	}})
	for k := range m {
		if k != "error" {
			c.fail(path, "unexpected field %q (additionalProperties: false)", k)
		}
	}
}

// OAuthError.
func (c *checker) oauthError(path string, v any) {
	c.obj(path, v, req("error"), props{
		"error": c.enum("invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
			"unsupported_grant_type", "invalid_scope"),
		"error_description": c.str, "error_uri": c.str,
	})
}

var tokenTypes = []string{
	"urn:ietf:params:oauth:token-type:access_token", "urn:ietf:params:oauth:token-type:refresh_token",
	"urn:ietf:params:oauth:token-type:id_token", "urn:ietf:params:oauth:token-type:saml1",
	"urn:ietf:params:oauth:token-type:saml2", "urn:ietf:params:oauth:token-type:jwt",
}

// OAuthTokenResponse.
func (c *checker) oauthTokenResponse(path string, v any) {
	c.obj(path, v, req("access_token", "token_type"), props{
		"access_token": c.str, "token_type": c.enum("bearer", "mac", "N_A"), "expires_in": c.integer,
		"issued_token_type": c.enum(tokenTypes...), "refresh_token": c.str, "scope": c.str,
	})
}

// CatalogConfig.
func (c *checker) catalogConfig(path string, v any) {
	c.obj(path, v, req("defaults", "overrides"), props{
		"defaults": c.stringMap, "overrides": c.stringMap, "idempotency-key-lifetime": c.str,
		"endpoints": c.array(func(p string, v any) {
			c.str(p, v)
			if s, ok := v.(string); ok {
				if verb, route, ok := strings.Cut(s, " "); !ok || verb == "" || !strings.HasPrefix(route, "/v1/") {
					c.fail(p, "%q is not \"<HTTP verb> <resource path>\"", s)
				}
			}
		}),
	})
}

// Namespace.
func (c *checker) namespace(path string, v any) { c.array(c.str)(path, v) }

// TableIdentifier.
func (c *checker) tableIdentifier(path string, v any) {
	c.obj(path, v, req("namespace", "name"), props{"namespace": c.namespace, "name": c.str})
}

// ListNamespacesResponse.
func (c *checker) listNamespacesResponse(path string, v any) {
	c.obj(path, v, nil, props{"next-page-token": c.nullableStr, "namespaces": c.array(c.namespace)})
}

// GetNamespaceResponse.
func (c *checker) getNamespaceResponse(path string, v any) {
	c.obj(path, v, req("namespace"), props{"namespace": c.namespace, "properties": func(p string, v any) {
		if v != nil {
			c.stringMap(p, v)
		}
	}})
}

// ListTablesResponse.
func (c *checker) listTablesResponse(path string, v any) {
	c.obj(path, v, nil, props{"next-page-token": c.nullableStr, "identifiers": c.array(c.tableIdentifier)})
}

// LoadTableResult.
func (c *checker) loadTableResult(path string, v any) {
	c.obj(path, v, req("metadata"), props{
		"metadata-location": c.nullableStr, "metadata": c.tableMetadata, "config": c.stringMap,
		"storage-credentials": c.array(func(p string, v any) {
			c.obj(p, v, req("prefix", "config"), props{"prefix": c.str, "config": c.stringMap})
		}),
	})
}

// CommitTableResponse.
func (c *checker) commitTableResponse(path string, v any) {
	c.obj(path, v, req("metadata-location", "metadata"), props{"metadata-location": c.str, "metadata": c.tableMetadata})
}

// timestamped is the shape of SnapshotLog and MetadataLog entries: an id
// or file, and timestamp-ms.
func (c *checker) timestamped(key string, check func(string, any)) func(string, any) {
	return c.array(func(p string, v any) {
		c.obj(p, v, req(key, "timestamp-ms"), props{key: check, "timestamp-ms": c.integer})
	})
}

// TableMetadata.
func (c *checker) tableMetadata(path string, v any) {
	c.obj(path, v, req("format-version", "table-uuid"), props{
		"format-version": c.intRange(1, 3), "table-uuid": c.str, "location": c.str,
		"last-updated-ms": c.integer, "next-row-id": c.integer, "current-schema-id": c.integer,
		"last-column-id": c.integer, "default-spec-id": c.integer, "last-partition-id": c.integer,
		"default-sort-order-id": c.integer, "last-sequence-number": c.integer,
		// -1 (or null in older writers) means no current snapshot.
		"current-snapshot-id": c.nullableInt,
		"properties":          c.stringMap,
		"schemas":             c.array(c.schema),
		"partition-specs":     c.array(c.partitionSpec),
		"sort-orders":         c.array(c.sortOrder),
		"snapshots":           c.array(c.snapshot),
		"refs": func(p string, v any) {
			for name, ref := range c.object(p, v) {
				c.snapshotReference(p+"."+name, ref)
			}
		},
		"snapshot-log":         c.timestamped("snapshot-id", c.integer),
		"metadata-log":         c.timestamped("metadata-file", c.str),
		"statistics":           c.array(c.statisticsFile),
		"partition-statistics": c.array(c.partitionStatisticsFile),
		"encryption-keys":      c.array(c.encryptedKey),
	})
}

// Schema: a StructType with schema-id and identifier-field-ids.
func (c *checker) schema(path string, v any) {
	m := c.structType(path, v)
	field(m, path, "schema-id", c.integer)
	field(m, path, "identifier-field-ids", c.array(c.integer))
}

// StructType.
func (c *checker) structType(path string, v any) map[string]any {
	return c.obj(path, v, req("type", "fields"), props{
		"type": c.enum("struct"),
		"fields": c.array(func(p string, v any) {
			c.obj(p, v, req("id", "name", "type", "required"), props{
				"id": c.integer, "name": c.str, "type": c.typ, "required": c.boolean, "doc": c.str,
			})
		}),
	})
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
		c.obj(path, v, req("element-id", "element", "element-required"), props{
			"element-id": c.integer, "element": c.typ, "element-required": c.boolean,
		})
	case "map":
		c.obj(path, v, req("key-id", "key", "value-id", "value", "value-required"), props{
			"key-id": c.integer, "key": c.typ, "value-id": c.integer, "value": c.typ, "value-required": c.boolean,
		})
	default:
		c.fail(path+".type", "%v is not struct, list or map", m["type"])
	}
}

// PartitionSpec.
func (c *checker) partitionSpec(path string, v any) {
	c.obj(path, v, req("fields"), props{"spec-id": c.integer, "fields": c.array(func(p string, v any) {
		c.obj(p, v, req("source-id", "transform", "name"), props{
			"field-id": c.integer, "source-id": c.integer, "name": c.str, "transform": c.str,
		})
	})})
}

// SortOrder.
func (c *checker) sortOrder(path string, v any) {
	c.obj(path, v, req("order-id", "fields"), props{"order-id": c.integer, "fields": c.array(func(p string, v any) {
		c.obj(p, v, req("source-id", "transform", "direction", "null-order"), props{
			"source-id": c.integer, "transform": c.str,
			"direction": c.enum("asc", "desc"), "null-order": c.enum("nulls-first", "nulls-last"),
		})
	})})
}

// Snapshot.
func (c *checker) snapshot(path string, v any) {
	c.obj(path, v, req("snapshot-id", "timestamp-ms", "manifest-list", "summary"), props{
		"snapshot-id": c.integer, "parent-snapshot-id": c.integer, "sequence-number": c.integer,
		"timestamp-ms": c.integer, "first-row-id": c.integer, "added-rows": c.integer, "schema-id": c.integer,
		"manifest-list": c.str,
		"summary": func(p string, v any) {
			s := c.obj(p, v, req("operation"), props{"operation": c.enum("append", "replace", "overwrite", "delete")})
			for k, x := range s {
				c.str(p+"."+k, x)
			}
		},
	})
}

// SnapshotReference.
func (c *checker) snapshotReference(path string, v any) {
	c.obj(path, v, req("type", "snapshot-id"), props{
		"type": c.enum("tag", "branch"), "snapshot-id": c.integer,
		"max-ref-age-ms": c.integer, "max-snapshot-age-ms": c.integer, "min-snapshots-to-keep": c.integer,
	})
}

// StatisticsFile.
func (c *checker) statisticsFile(path string, v any) {
	c.obj(path, v, req("snapshot-id", "statistics-path", "file-size-in-bytes", "file-footer-size-in-bytes", "blob-metadata"), props{
		"snapshot-id": c.integer, "statistics-path": c.str, "file-size-in-bytes": c.integer,
		"file-footer-size-in-bytes": c.integer,
		"blob-metadata": c.array(func(p string, v any) {
			c.obj(p, v, req("type", "snapshot-id", "sequence-number", "fields"), props{
				"type": c.str, "snapshot-id": c.integer, "sequence-number": c.integer,
				"fields": c.array(c.integer), "properties": c.stringMap,
			})
		}),
	})
}

// PartitionStatisticsFile.
func (c *checker) partitionStatisticsFile(path string, v any) {
	c.obj(path, v, req("snapshot-id", "statistics-path", "file-size-in-bytes"), props{
		"snapshot-id": c.integer, "statistics-path": c.str, "file-size-in-bytes": c.integer,
	})
}

// EncryptedKey.
func (c *checker) encryptedKey(path string, v any) {
	c.obj(path, v, req("key-id", "encrypted-key-metadata"), props{
		"key-id": c.str, "encrypted-key-metadata": c.str, "encrypted-by-id": c.str, "properties": c.stringMap,
	})
}

// CommitTableRequest.
func (c *checker) commitTableRequest(path string, v any) {
	c.obj(path, v, req("requirements", "updates"), props{
		"identifier": c.tableIdentifier, "requirements": c.array(c.tableRequirement), "updates": c.array(c.tableUpdate),
	})
}

// requirementFields are the fields each TableRequirement type requires
// beyond "type", with their checks: the spec's discriminator mapping.
func (c *checker) requirementFields(typ string) (props, bool) {
	f, ok := map[string]props{
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
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if _, present := m[k]; !present {
			c.fail(path, "%s requires field %q", typ, k)
		}
	}
	c.obj(path, v, nil, fields)
}

// TableUpdate, by its discriminator "action": the required fields of each
// update type and the checks of the fields it may carry.
func (c *checker) tableUpdate(path string, v any) {
	m := c.object(path, v, "action")
	action, _ := m["action"].(string)
	type spec struct {
		required []string
		fields   props
	}
	specs := map[string]spec{
		"assign-uuid":            {req("uuid"), props{"uuid": c.str}},
		"upgrade-format-version": {req("format-version"), props{"format-version": c.integer}},
		"add-schema":             {req("schema"), props{"schema": c.schema, "last-column-id": c.integer}},
		"set-current-schema":     {req("schema-id"), props{"schema-id": c.integer}},
		"add-spec":               {req("spec"), props{"spec": c.partitionSpec}},
		"set-default-spec":       {req("spec-id"), props{"spec-id": c.integer}},
		"add-sort-order":         {req("sort-order"), props{"sort-order": c.sortOrder}},
		"set-default-sort-order": {req("sort-order-id"), props{"sort-order-id": c.integer}},
		"add-snapshot":           {req("snapshot"), props{"snapshot": c.snapshot}},
		"set-snapshot-ref": {req("ref-name", "type", "snapshot-id"), props{
			"ref-name": c.str, "type": c.enum("tag", "branch"), "snapshot-id": c.integer,
			"max-ref-age-ms": c.integer, "max-snapshot-age-ms": c.integer, "min-snapshots-to-keep": c.integer}},
		"remove-snapshots":            {req("snapshot-ids"), props{"snapshot-ids": c.array(c.integer)}},
		"remove-snapshot-ref":         {req("ref-name"), props{"ref-name": c.str}},
		"set-location":                {req("location"), props{"location": c.str}},
		"set-properties":              {req("updates"), props{"updates": c.stringMap}},
		"remove-properties":           {req("removals"), props{"removals": c.array(c.str)}},
		"set-statistics":              {req("statistics"), props{"statistics": c.statisticsFile, "snapshot-id": c.integer}},
		"remove-statistics":           {req("snapshot-id"), props{"snapshot-id": c.integer}},
		"set-partition-statistics":    {req("partition-statistics"), props{"partition-statistics": c.partitionStatisticsFile}},
		"remove-partition-statistics": {req("snapshot-id"), props{"snapshot-id": c.integer}},
		"remove-partition-specs":      {req("spec-ids"), props{"spec-ids": c.array(c.integer)}},
		"remove-schemas":              {req("schema-ids"), props{"schema-ids": c.array(c.integer)}},
		"add-encryption-key":          {req("encryption-key"), props{"encryption-key": c.encryptedKey}},
		"remove-encryption-key":       {req("key-id"), props{"key-id": c.str}},
	}
	s, ok := specs[action]
	if !ok {
		c.fail(path+".action", "unknown update action %v", m["action"])
		return
	}
	c.obj(path, v, s.required, s.fields)
}
