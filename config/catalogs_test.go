package config

import (
	"strings"
	"testing"
)

// Each refusal of a catalog iceberg-go could not open, or would open
// unsafely, names the key at its line.
func TestCatalogProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
		want []string // prefixes, in file order
	}{{
		name: "hadoop on s3 without the unsafe-commit choice",
		src:  "catalog:\n  type: hadoop\n  warehouse: s3://lake/wh\n",
		want: []string{`maintainer.yaml:3:3: catalog.warehouse: s3://: a hadoop catalog commits by renaming a metadata file, and an object store has no atomic rename: ` +
			`two committers (a writer and this maintainer, or two maintainers) can overwrite each other's metadata and lose a commit. ` +
			`Use a catalog with atomic commits (rest, glue, hive or sql), or accept the risk with catalog.properties["allow-unsafe-commits"]: "true"`},
	}, {
		name: "hadoop on every object store, warehouse in the properties",
		src: "catalog:\n  type: hadoop\n  properties:\n    warehouse: gs://lake/wh\n" +
			"tables:\n  - match: a.*\n",
		want: []string{`maintainer.yaml:4:5: catalog.properties["warehouse"]: gs://: a hadoop catalog commits by renaming`},
	}, {
		name: "hadoop with the choice refused or malformed",
		src:  "catalog:\n  type: hadoop\n  warehouse: abfss://c@acct.dfs.core.windows.net/wh\n  properties: {allow-unsafe-commits: \"false\"}\n",
		want: []string{`maintainer.yaml:4:16: catalog.properties["allow-unsafe-commits"]: false: iceberg-go refuses a hadoop catalog on abfss:// unless it is true; a hadoop catalog commits by renaming`},
	}, {
		name: "allow-unsafe-commits not a boolean",
		src:  "catalog:\n  type: hadoop\n  warehouse: s3a://lake/wh\n  properties: {allow-unsafe-commits: \"yes\"}\n",
		want: []string{`maintainer.yaml:4:16: catalog.properties["allow-unsafe-commits"]: must be true or false (got "yes")`},
	}, {
		name: "allow-unsafe-commits that did not expand is reported once",
		src:  "catalog:\n  type: hadoop\n  warehouse: s3://lake/wh\n  properties: {allow-unsafe-commits: \"${UNSAFE}\"}\n",
		want: []string{`maintainer.yaml:4:16: catalog.properties["allow-unsafe-commits"]: environment variable UNSAFE is not set`},
	}, {
		name: "hdfs has no IO",
		src:  "catalog:\n  type: hadoop\n  warehouse: hdfs://nn:8020/warehouse\n",
		want: []string{`maintainer.yaml:3:3: catalog.warehouse: scheme "hdfs" has no IO in this build (iceberg-go v0.7.0 has none for HDFS); ` +
			`locations may be a bare path or use file, s3, s3a, s3n, oss, gs, abfs, abfss, wasb, wasbs (got "hdfs://nn:8020/warehouse")`},
	}, {
		name: "an unregistered scheme on a glue, hive or sql warehouse",
		src: "catalog:\n  type: sql\n  uri: file:/tmp/c.db\n  warehouse: webhdfs://nn/wh\n" +
			"  properties: {sql.driver: sqliteshim, sql.dialect: sqlite}\n",
		want: []string{`maintainer.yaml:4:3: catalog.warehouse: scheme "webhdfs" has no IO in this build`},
	}, {
		name: "hadoop: a warehouse iceberg-go cannot parse",
		src:  "catalog:\n  type: hadoop\n  warehouse: /data/100%\n",
		want: []string{`maintainer.yaml:3:3: catalog.warehouse: not a location: parse "/data/100%": invalid URL escape "%"`},
	}, {
		name: "glue: no region anywhere",
		src:  "catalog:\n  type: glue\n",
		want: []string{`maintainer.yaml:1:1: catalog.properties["glue.region"]: required: iceberg-go's Glue catalog takes the region from it, else from the AWS SDK's defaults ` +
			`(AWS_REGION, AWS_DEFAULT_REGION, the profile's region in the shared config file), and none of them gives one`},
	}, {
		name: "glue: region in a shared config profile that has none",
		src:  "catalog:\n  type: glue\n  properties: {glue.id: \"123456789012\"}\n",
		env:  map[string]string{"AWS_CONFIG_FILE": "testdata/aws-config", "AWS_PROFILE": "noregion"},
		want: []string{`maintainer.yaml:3:3: catalog.properties["glue.region"]: required`},
	}, {
		name: "glue: credentials, knobs and keys iceberg-go does not read",
		src: `catalog:
  type: glue
  warehouse: hdfs://nn/wh
  properties:
    glue.region: eu-west-1
    glue.access-key-id: AKIA
    glue.profile-name: prod
    glue.max-retries: many
    glue.retry-mode: fast
    glue.skip-archive: "maybe"
    glue.endpoint: glue.internal
`,
		want: []string{
			`maintainer.yaml:3:3: catalog.warehouse: scheme "hdfs" has no IO`,
			`maintainer.yaml:4:3: catalog.properties["glue.secret-access-key"]: required with glue.access-key-id (static credentials are a key and its secret); remove both to use the AWS default credential chain`,
			`maintainer.yaml:7:5: catalog.properties["glue.profile-name"]: not read by iceberg-go's Glue catalog (it reads glue.id, glue.region, glue.endpoint, glue.access-key-id, glue.secret-access-key, glue.session-token, glue.max-retries, glue.retry-mode, glue.skip-archive); name a shared-config profile with AWS_PROFILE`,
			`maintainer.yaml:8:5: catalog.properties["glue.max-retries"]: must be a whole number of attempts (got "many")`,
			`maintainer.yaml:9:5: catalog.properties["glue.retry-mode"]: must be standard or adaptive (got "fast")`,
			`maintainer.yaml:10:5: catalog.properties["glue.skip-archive"]: must be true or false (got "maybe")`,
			`maintainer.yaml:11:5: catalog.properties["glue.endpoint"]: must be an http:// or https:// URL (got "glue.internal")`,
		},
	}, {
		name: "glue: glue.endpoint beside AWS_ENDPOINT_URL alone",
		src:  "catalog:\n  type: glue\n  properties:\n    glue.region: eu-west-1\n    glue.endpoint: https://glue.internal\n",
		env:  map[string]string{"AWS_ENDPOINT_URL": "http://localstack:4566"},
		want: []string{`maintainer.yaml:5:5: catalog.properties["glue.endpoint"]: AWS_ENDPOINT_URL is set too, and the AWS SDK would send the Glue requests there: set AWS_ENDPOINT_URL_GLUE, or leave out one of them`},
	}, {
		name: "a value that did not expand is reported once",
		src:  "catalog:\n  type: glue\n  properties:\n    glue.region: eu-west-1\n    glue.max-retries: ${RETRIES}\n    glue.access-key-id: ${KEY}\n    glue.secret-access-key: s\n",
		want: []string{
			`maintainer.yaml:5:5: catalog.properties["glue.max-retries"]: environment variable RETRIES is not set`,
			`maintainer.yaml:6:5: catalog.properties["glue.access-key-id"]: environment variable KEY is not set`,
		},
	}, {
		name: "glue: a secret without its key, a token without either",
		src:  "catalog:\n  type: glue\n  properties:\n    glue.region: eu-west-1\n    glue.secret-access-key: s\n",
		want: []string{`maintainer.yaml:3:3: catalog.properties["glue.access-key-id"]: required with glue.secret-access-key`},
	}, {
		name: "glue: a session token alone",
		src:  "catalog:\n  type: glue\n  properties:\n    glue.region: eu-west-1\n    glue.session-token: t\n",
		want: []string{`maintainer.yaml:5:5: catalog.properties["glue.session-token"]: needs glue.access-key-id and glue.secret-access-key`},
	}, {
		name: "hive: uri required",
		src:  "catalog:\n  type: hive\n  warehouse: s3://lake/wh\n",
		want: []string{`maintainer.yaml:1:1: catalog.uri: required for a hive catalog`},
	}, {
		name: "hive: not a thrift URI",
		src:  "catalog:\n  type: hive\n  uri: http://metastore:9083\n",
		want: []string{`maintainer.yaml:3:3: catalog.uri: must be thrift://host:port, the metastore's Thrift endpoint (port 9083 by default) (got "http://metastore:9083")`},
	}, {
		name: "hive: no host, in the properties",
		src:  "catalog:\n  type: hive\n  properties: {uri: \"thrift://:9083\"}\n",
		want: []string{`maintainer.yaml:3:16: catalog.properties["uri"]: must be thrift://host:port`},
	}, {
		name: "hive: a path",
		src:  "catalog:\n  type: hive\n  uri: thrift://ms:9083/db\n",
		want: []string{`maintainer.yaml:3:3: catalog.uri: must be thrift://host:port`},
	}, {
		name: "hive: port out of range",
		src:  "catalog:\n  type: hive\n  uri: thrift://ms:99999\n",
		want: []string{`maintainer.yaml:3:3: catalog.uri: port must be 1-65535 (got "thrift://ms:99999")`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.src, tc.env)
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tc.want[i])
			}
			if !ok {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The forms iceberg-go accepts pass: every refusal above has an accepted
// neighbour.
func TestCatalogAccepted(t *testing.T) {
	home := t.TempDir()
	writeFile(t, home, ".aws/config", "[default]\nregion = eu-west-1\n")
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
	}{
		{"hadoop on local disk", "catalog:\n  type: hadoop\n  warehouse: /data/wh\n", nil},
		{"hadoop on file://", "catalog:\n  type: hadoop\n  warehouse: file:///data/wh\n", nil},
		{"hadoop on s3 with the choice stated", "catalog:\n  type: hadoop\n  warehouse: s3://lake/wh\n  properties: {allow-unsafe-commits: \"true\"}\n", nil},
		{"hadoop on gs, choice as TRUE", "catalog:\n  type: hadoop\n  warehouse: gs://lake/wh\n  properties: {allow-unsafe-commits: \"TRUE\"}\n", nil},
		{"sql: a warehouse path that is no URL is not read as one", "catalog:\n  type: sql\n  uri: file:/tmp/c.db\n  warehouse: /data/100%\n  properties: {sql.driver: sqliteshim, sql.dialect: sqlite}\n", nil},
		{"rest: a warehouse is the server's name for it", "catalog:\n  type: rest\n  uri: http://r\n  warehouse: hdfs-lake\n", nil},
		{"glue: region property", "catalog:\n  type: glue\n  warehouse: s3://lake/wh\n  properties: {glue.region: eu-west-1, glue.id: \"1\", glue.skip-archive: \"false\"}\n", nil},
		{"glue: AWS_REGION", "catalog:\n  type: glue\n", map[string]string{"AWS_REGION": "eu-west-1"}},
		{"glue: AWS_DEFAULT_REGION", "catalog:\n  type: glue\n", map[string]string{"AWS_DEFAULT_REGION": "eu-west-1"}},
		{"glue: the default profile's region", "catalog:\n  type: glue\n", map[string]string{"HOME": home}},
		{"glue: a named profile's region", "catalog:\n  type: glue\n", map[string]string{"AWS_CONFIG_FILE": "testdata/aws-config", "AWS_PROFILE": "lake"}},
		{"glue: static credentials and every knob", `catalog:
  type: glue
  properties:
    glue.region: eu-west-1
    glue.access-key-id: AKIA
    glue.secret-access-key: ${SECRET}
    glue.session-token: tok
    glue.endpoint: https://glue.eu-west-1.amazonaws.com
    glue.max-retries: "5"
    glue.retry-mode: adaptive
`, map[string]string{"SECRET": "s"}},
		{"glue: glue.endpoint beside AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_GLUE", "catalog:\n  type: glue\n  properties: {glue.region: eu-west-1, glue.endpoint: \"https://glue.internal\"}\n",
			map[string]string{"AWS_ENDPOINT_URL": "http://localstack:4566", "AWS_ENDPOINT_URL_GLUE": "https://glue.internal"}},
		{"hive: thrift with a port", "catalog:\n  type: hive\n  uri: thrift://metastore:9083\n  warehouse: s3a://lake/wh\n", nil},
		{"hive: thrift, default port", "catalog:\n  type: hive\n  uri: thrift://metastore\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustParse(t, tc.src, tc.env)
		})
	}
}
