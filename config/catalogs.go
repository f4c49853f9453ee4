package config

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// storageSchemes are the location schemes the binary reads and writes:
// iceberg-go's local IO ("file", or a bare path) and the gocloud IOs that
// cmd/maintainer registers (S3, GCS, Azure). A test there keeps this list
// equal to iceberg-go's registry. iceberg-go v0.7.0 has no HDFS IO.
var storageSchemes = []string{"file", "s3", "s3a", "s3n", "oss", "gs", "abfs", "abfss", "wasb", "wasbs"}

// StorageSchemes returns the location schemes a warehouse may use.
func StorageSchemes() []string { return slices.Clone(storageSchemes) }

// Property names iceberg-go v0.7.0 reads (catalog/glue, catalog/hadoop).
const (
	PropAllowUnsafeCommits = "allow-unsafe-commits"
	PropGlueRegion         = "glue.region"
	PropGlueAccessKeyID    = "glue.access-key-id"
	PropGlueSecretKey      = "glue.secret-access-key"
	PropGlueSessionToken   = "glue.session-token"
	PropGlueEndpoint       = "glue.endpoint"
	PropGlueMaxRetries     = "glue.max-retries"
	PropGlueRetryMode      = "glue.retry-mode"
	PropGlueID             = "glue.id"
	PropGlueSkipArchive    = "glue.skip-archive"
)

// glueProps are every glue.* property iceberg-go's Glue catalog reads; any
// other would be passed along and silently ignored.
var glueProps = []string{
	PropGlueID, PropGlueRegion, PropGlueEndpoint, PropGlueAccessKeyID, PropGlueSecretKey,
	PropGlueSessionToken, PropGlueMaxRetries, PropGlueRetryMode, PropGlueSkipArchive,
}

// DefaultHivePort is the metastore port iceberg-go uses when the URI has none.
const DefaultHivePort = 9083

// catalogKey names where a catalog property was set: its own key
// (catalog.uri) or the properties block.
func (v *validator) catalogKey(own, prop string) string {
	if own != "" && v.d.isSet("catalog."+own) {
		return "catalog." + own
	}
	return propKey(prop)
}

func propKey(prop string) string { return fmt.Sprintf("catalog.properties[%q]", prop) }

// catalogChecks checks what can be checked of a catalog without reaching it:
// the forms iceberg-go accepts, and the choices it would refuse at open.
func (v *validator) catalogChecks(cat *CatalogConfig, props map[string]string) {
	switch cat.Type {
	case CatalogGlue:
		v.glue(props)
	case CatalogHive:
		v.hiveURI(props)
	}
	// A REST warehouse is a name the server interprets, not a location.
	if cat.Type != CatalogREST {
		v.warehouse(cat.Type, props)
	}
}

// warehouse checks that the warehouse is a location the binary can read and
// write, and that a hadoop catalog on an object store is a stated choice.
func (v *validator) warehouse(typ string, props map[string]string) {
	wh := props["warehouse"]
	path := v.catalogKey("warehouse", "warehouse")
	if wh == "" || !v.checkable(path) {
		return
	}
	u, err := url.Parse(wh)
	if err != nil {
		// iceberg-go's hadoop catalog parses its warehouse and fails to
		// open; the other catalogs do not read it as a URL.
		if typ == CatalogHadoop {
			v.problem(path, "not a location: %v", err)
		}
		return
	}
	if u.Scheme != "" && !slices.Contains(storageSchemes, u.Scheme) {
		v.problem(path, "scheme %q has no IO in this build (iceberg-go v0.7.0 has none for HDFS); locations may be a bare path or use %s (got %q)",
			u.Scheme, strings.Join(storageSchemes, ", "), wh)
		return
	}
	if typ != CatalogHadoop || u.Scheme == "" || u.Scheme == "file" {
		return
	}
	// iceberg-go's hadoop catalog refuses anything but local disk unless
	// allow-unsafe-commits is true; say why here rather than exit 3 later.
	const why = "a hadoop catalog commits by renaming a metadata file, and an object store has no atomic rename: " +
		"two committers (a writer and this maintainer, or two maintainers) can overwrite each other's metadata and lose a commit. " +
		"Use a catalog with atomic commits (rest, glue, hive or sql)"
	raw, set := props[PropAllowUnsafeCommits]
	unsafe, perr := strconv.ParseBool(raw)
	switch {
	case !v.checkable(propKey(PropAllowUnsafeCommits)): // its value did not expand: reported
	case !set:
		v.problem(path, "%s://: %s, or accept the risk with catalog.properties[%q]: \"true\"", u.Scheme, why, PropAllowUnsafeCommits)
	case perr != nil:
		v.problem(propKey(PropAllowUnsafeCommits), "must be true or false (got %q)", raw)
	case !unsafe:
		v.problem(propKey(PropAllowUnsafeCommits), "false: iceberg-go refuses a hadoop catalog on %s:// unless it is true; %s", u.Scheme, why)
	}
}

// glue checks the properties iceberg-go's Glue catalog reads, as it reads
// them (catalog/glue toAwsConfig): a bad one fails the open (exit 3) or
// is silently ignored.
func (v *validator) glue(props map[string]string) {
	// prop is a property whose value decoded, so that a bad value is not
	// reported twice.
	prop := func(k string) (string, bool) {
		s, ok := props[k]
		return s, ok && v.checkable(propKey(k))
	}
	for k := range props {
		if strings.HasPrefix(k, "glue.") && !slices.Contains(glueProps, k) {
			hint := ""
			if strings.Contains(k, "profile") {
				hint = "; name a shared-config profile with AWS_PROFILE"
			}
			v.problem(propKey(k), "not read by iceberg-go's Glue catalog (it reads %s)%s", strings.Join(glueProps, ", "), hint)
		}
	}
	// Static credentials are a key with its secret (and maybe a session
	// token); without them the AWS default credential chain is used.
	key, secret, token := props[PropGlueAccessKeyID], props[PropGlueSecretKey], props[PropGlueSessionToken]
	switch {
	case !v.checkable(propKey(PropGlueAccessKeyID)) || !v.checkable(propKey(PropGlueSecretKey)) || !v.checkable(propKey(PropGlueSessionToken)):
	case key != "" && secret == "":
		v.problem(propKey(PropGlueSecretKey), "required with %s (static credentials are a key and its secret); remove both to use the AWS default credential chain", PropGlueAccessKeyID)
	case key == "" && secret != "":
		v.problem(propKey(PropGlueAccessKeyID), "required with %s (static credentials are a key and its secret); remove both to use the AWS default credential chain", PropGlueSecretKey)
	case key == "" && token != "":
		v.problem(propKey(PropGlueSessionToken), "needs %s and %s", PropGlueAccessKeyID, PropGlueSecretKey)
	}
	if s, ok := prop(PropGlueMaxRetries); ok {
		if n, err := strconv.Atoi(s); err != nil || n < 0 {
			v.problem(propKey(PropGlueMaxRetries), "must be a whole number of attempts (got %q)", s)
		}
	}
	if s, ok := prop(PropGlueRetryMode); ok && s != "standard" && s != "adaptive" {
		v.problem(propKey(PropGlueRetryMode), "must be standard or adaptive (got %q)", s)
	}
	if s, ok := prop(PropGlueSkipArchive); ok {
		if _, err := strconv.ParseBool(s); err != nil {
			v.problem(propKey(PropGlueSkipArchive), "must be true or false (got %q)", s)
		}
	}
	if s, ok := prop(PropGlueEndpoint); ok {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.problem(propKey(PropGlueEndpoint), "must be an http:// or https:// URL (got %q)", s)
		}
		// The AWS SDK's rule for the Glue client: AWS_ENDPOINT_URL without
		// AWS_ENDPOINT_URL_GLUE wins over any Glue-only endpoint, which is
		// what glue.endpoint is (objstore.GlueAWSConfig).
		_, global := v.d.env("AWS_ENDPOINT_URL")
		if _, own := v.d.env("AWS_ENDPOINT_URL_GLUE"); global && !own {
			v.problem(propKey(PropGlueEndpoint), "AWS_ENDPOINT_URL is set too, and the AWS SDK would send the Glue requests there: set AWS_ENDPOINT_URL_GLUE, or leave out one of them")
		}
	}
	if props[PropGlueRegion] == "" && v.checkable(propKey(PropGlueRegion)) {
		if from := v.awsDefaultRegion(); from == "" {
			v.problem(propKey(PropGlueRegion), "required: iceberg-go's Glue catalog takes the region from it, else from the AWS SDK's defaults "+
				"(AWS_REGION, AWS_DEFAULT_REGION, the profile's region in the shared config file), and none of them gives one")
		}
	}
}

// awsDefaultRegion says where the AWS SDK's default chain would find a
// region (as config.LoadDefaultConfig resolves it: environment, then the
// shared config file's profile), or "" when it finds none.
func (v *validator) awsDefaultRegion() string {
	env := func(k string) string { s, _ := v.d.env(k); return s }
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if env(k) != "" {
			return k
		}
	}
	profile := env("AWS_PROFILE")
	if profile == "" {
		profile = env("AWS_DEFAULT_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	file := env("AWS_CONFIG_FILE")
	if file == "" {
		home := env("HOME")
		if home == "" {
			return ""
		}
		file = filepath.Join(home, ".aws", "config")
	}
	sc, err := awsconfig.LoadSharedConfigProfile(context.Background(), profile, func(o *awsconfig.LoadSharedConfigOptions) {
		o.ConfigFiles, o.CredentialsFiles = []string{file}, []string{}
	})
	if err != nil || sc.Region == "" {
		return ""
	}
	return file
}

// hiveURI checks the metastore URI as iceberg-go's Hive client dials it:
// thrift://host[:port], binary transport, port 9083 by default.
func (v *validator) hiveURI(props map[string]string) {
	uri := props["uri"]
	path := v.catalogKey("uri", "uri")
	if uri == "" || !v.checkable(path) {
		return // required, reported by the caller
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "thrift" || u.Hostname() == "" || u.Path != "" && u.Path != "/" {
		v.problem(path, "must be thrift://host:port, the metastore's Thrift endpoint (port %d by default) (got %q)", DefaultHivePort, uri)
		return
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			v.problem(path, "port must be 1-65535 (got %q)", uri)
		}
	}
}
