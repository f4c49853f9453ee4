package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/catalog/hive"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"

	"github.com/iceberg-maintainer/maintainer/config"
)

// loadCatalogConfig parses a config whose catalog block is yaml, with the
// files it names written next to it.
func loadCatalogConfig(t *testing.T, yaml string, files map[string]string, env map[string]string) config.CatalogConfig {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Parse(filepath.Join(dir, "maintainer.yaml"), []byte(yaml), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.Catalog
}

// The properties handed to iceberg-go carry each setting under the name
// iceberg-go v0.7.0 reads it by (its exported keys where it has them),
// secrets from their files included.
func TestCatalogPropsAreWhatIcebergGoReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		files map[string]string
		env   map[string]string
		want  iceberg.Properties
	}{{
		name: "glue",
		yaml: `catalog:
  name: lake
  type: glue
  warehouse: s3://lake/wh
  properties:
    glue.region: eu-west-1
    glue.id: "123456789012"
    glue.endpoint: https://glue.eu-west-1.amazonaws.com
    glue.access-key-id: AKIAEXAMPLE
    glue.secret-access-key: ${GLUE_SECRET}
    glue.session-token: ${GLUE_TOKEN}
    glue.max-retries: "5"
    glue.retry-mode: adaptive
    s3.region: eu-west-1
`,
		env: map[string]string{"GLUE_SECRET": "glue-s3cret", "GLUE_TOKEN": "glue-session"},
		want: iceberg.Properties{
			"type": "glue", "warehouse": "s3://lake/wh",
			glue.Region: "eu-west-1", glue.CatalogIdKey: "123456789012",
			glue.Endpoint:    "https://glue.eu-west-1.amazonaws.com",
			glue.AccessKeyID: "AKIAEXAMPLE", glue.SecretAccessKey: "glue-s3cret", glue.SessionToken: "glue-session",
			glue.MaxRetries: "5", glue.RetryMode: "adaptive",
			iceio.S3Region: "eu-west-1",
		},
	}, {
		name: "hive",
		yaml: "catalog:\n  type: hive\n  uri: thrift://metastore:9083\n  warehouse: s3a://lake/wh\n" +
			"  properties: {iceberg.hive.lock-check-max-wait-ms: \"10000\"}\n",
		want: iceberg.Properties{
			"type": "hive", hive.URI: "thrift://metastore:9083", hive.Warehouse: "s3a://lake/wh",
			hive.LockCheckMaxWaitMs: "10000",
		},
	}, {
		name: "rest, credential and token from files",
		yaml: "catalog:\n  type: rest\n  uri: https://rest:8181\n  warehouse: lake\n" +
			"  credential_file: credential\n  token_file: token\n  properties: {scope: catalog}\n",
		files: map[string]string{"credential": "id:secret\n", "token": " tok-123\n"},
		want: iceberg.Properties{
			"type": "rest", "uri": "https://rest:8181", "warehouse": "lake",
			"credential": "id:secret", "token": "tok-123", "scope": "catalog",
		},
	}, {
		name: "sql on SQLite: never created, busy timeout",
		yaml: "catalog:\n  type: sql\n  uri: file:/data/catalog.db\n  warehouse: file:///data/wh\n" +
			"  properties: {sql.driver: sqlite, sql.dialect: sqlite}\n",
		want: iceberg.Properties{
			"type": "sql", "uri": "file:/data/catalog.db?_pragma=busy_timeout(30000)", "warehouse": "file:///data/wh",
			sqlcat.DriverKey: "sqlite", sqlcat.DialectKey: "sqlite", "init_catalog_tables": "false",
		},
	}, {
		name: "sql on PostgreSQL, the user's init choice stands",
		yaml: "catalog:\n  type: sql\n  uri: postgres://u:${PGPASS}@pg:5432/c\n" +
			"  properties: {sql.driver: pgx, sql.dialect: postgres, init_catalog_tables: \"true\"}\n",
		env: map[string]string{"PGPASS": "pw"},
		want: iceberg.Properties{
			"type": "sql", "uri": "postgres://u:pw@pg:5432/c",
			sqlcat.DriverKey: "pgx", sqlcat.DialectKey: "postgres", "init_catalog_tables": "true",
		},
	}, {
		name: "hadoop on S3, the unsafe-commit choice stated",
		yaml: "catalog:\n  type: hadoop\n  warehouse: s3://lake/wh\n" +
			"  properties: {allow-unsafe-commits: \"true\", s3.endpoint: \"http://127.0.0.1:1\"}\n",
		want: iceberg.Properties{
			"type": "hadoop", "warehouse": "s3://lake/wh",
			config.PropAllowUnsafeCommits: "true", iceio.S3EndpointURL: "http://127.0.0.1:1",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := catalogProps(loadCatalogConfig(t, tc.yaml, tc.files, tc.env))
			if !maps.Equal(got, tc.want) {
				t.Errorf("catalog properties\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// iceberg-go itself takes the properties as meant, where it can without a
// server: the hive options it derives, and glue and hadoop catalogs opened
// (neither reaches the network when opened).
func TestCatalogPropsOpenInIcebergGo(t *testing.T) {
	hiveProps := catalogProps(loadCatalogConfig(t, "catalog:\n  type: hive\n  uri: thrift://ms:9083\n  warehouse: gs://lake/wh\n", nil, nil))
	o := hive.NewHiveOptions()
	o.ApplyProperties(hiveProps)
	if o.URI != "thrift://ms:9083" || o.Warehouse != "gs://lake/wh" {
		t.Errorf("hive options: uri %q warehouse %q", o.URI, o.Warehouse)
	}

	for _, tc := range []struct{ name, yaml string }{
		{"glue", "catalog:\n  type: glue\n  properties: {glue.region: eu-west-1, glue.access-key-id: k, glue.secret-access-key: s, glue.max-retries: \"3\", glue.retry-mode: standard}\n"},
		{"hadoop local", "catalog:\n  type: hadoop\n  warehouse: " + t.TempDir() + "\n"},
		{"hadoop on S3", "catalog:\n  type: hadoop\n  warehouse: s3://lake/wh\n  properties: {allow-unsafe-commits: \"true\", s3.region: eu-west-1, s3.endpoint: \"http://127.0.0.1:1\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCatalogConfig(t, tc.yaml, nil, nil)
			cat, err := catalog.Load(t.Context(), c.Name, catalogProps(c))
			if err != nil {
				t.Fatalf("iceberg-go refused a config that config validate accepts: %v", err)
			}
			if got := string(cat.CatalogType()); got != c.Type {
				t.Errorf("catalog type %q; want %q", got, c.Type)
			}
			if cl, ok := cat.(catalog.Closer); ok {
				cl.Close()
			}
		})
	}
}

// config validate accepts a warehouse scheme exactly when this binary has
// an IO for it.
func TestStorageSchemesAreRegistered(t *testing.T) {
	var got []string
	for _, s := range iceio.GetRegisteredSchemes() {
		// "" is a bare path (accepted without a scheme); mem is iceberg-go's
		// in-process store, gone when the process ends.
		if s != "" && s != "mem" {
			got = append(got, s)
		}
	}
	slices.Sort(got)
	want := config.StorageSchemes()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("registered IO schemes %s; config validate accepts %s", strings.Join(got, ","), strings.Join(want, ","))
	}
	if slices.Contains(got, "hdfs") {
		t.Error("hdfs is registered: the docs say it is not")
	}
}

// A hadoop catalog on an object store is refused by config validate (exit
// 2, with the reason) unless the unsafe-commit choice is stated, rather than
// passing validation and exiting 3 on every command; an hdfs:// warehouse
// is refused for want of an IO.
func TestConfigValidateHadoopOnObjectStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, warehouse, props string
		code                   int
		fragments              []string
	}{
		{"s3 unstated", "s3://lake/wh", "", 2, []string{"catalog.warehouse: s3://:", "no atomic rename", `catalog.properties["allow-unsafe-commits"]: "true"`}},
		{"hdfs", "hdfs://nn:8020/wh", "", 2, []string{"catalog.warehouse:", `scheme "hdfs" has no IO`, "s3, s3a"}},
		{"s3 stated", "s3://lake/wh", "  properties: {allow-unsafe-commits: \"true\"}\n", 0, []string{"valid"}},
	} {
		cfg := writeFile(t, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml"),
			"catalog:\n  type: hadoop\n  warehouse: "+tc.warehouse+"\n"+tc.props)
		r := runMaintainer(t, dir, "config", "validate", "--config", cfg)
		expectCode(t, r, tc.code, "config validate, "+tc.name)
		for _, f := range tc.fragments {
			if !strings.Contains(r.stdout+r.stderr, f) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, f, r)
			}
		}
	}
}
