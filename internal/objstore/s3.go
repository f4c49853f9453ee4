package objstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 property keys, the ones iceberg-go's S3 IO (and Java's S3FileIO) read.
const (
	PropS3Endpoint        = "s3.endpoint"
	PropS3Region          = "s3.region"
	PropClientRegion      = "client.region"
	PropS3AccessKeyID     = "s3.access-key-id"
	PropS3SecretAccessKey = "s3.secret-access-key"
	PropS3SessionToken    = "s3.session-token"
	PropS3ProxyURI        = "s3.proxy-uri"
	PropS3RemoteSigning   = "s3.remote-signing-enabled"
	// PropS3PathStyleAccess ("true"/"false", Java's key) chooses path-style
	// requests; it wins over PropS3ForceVirtualAddressing, the key
	// iceberg-go reads. Without either, path style is used when an endpoint
	// is set, as in iceberg-go.
	PropS3PathStyleAccess        = "s3.path-style-access"
	PropS3ForceVirtualAddressing = "s3.force-virtual-addressing"
)

// ErrAWSEnvironment marks S3 settings that could not be built because of
// the AWS environment (AWS_PROFILE naming a missing profile, a broken shared
// config file), not because of a property.
var ErrAWSEnvironment = errors.New("load AWS config")

// UsesS3 says whether catalog properties say the catalog keeps tables on
// S3: an s3.* property, or an s3:// (s3a://, s3n://) warehouse. Without
// either, a catalog may still hold S3 tables (credentials and region from
// the environment alone), but nothing in the config says so.
func UsesS3(props map[string]string) bool {
	for k := range props {
		if strings.HasPrefix(k, "s3.") {
			return true
		}
	}
	scheme, _, ok := strings.Cut(props["warehouse"], "://")
	return ok && isS3Scheme(strings.ToLower(scheme))
}

// S3 are the settings of an S3 client.
type S3 struct {
	// AWS holds the region, the credentials (static ones from the
	// properties, else the SDK's default chain) and the transport.
	AWS aws.Config
	// Endpoint is s3.endpoint (or AWS_S3_ENDPOINT); "" = AWS's.
	Endpoint string
	// PathStyle: requests name the bucket in the path
	// (http://endpoint/bucket/key), not in the host name
	// (http://bucket.endpoint/key).
	PathStyle bool
	// TableIO says the store of an S3 table lists and deletes with the S3
	// client of the table's own iceberg-go IO (NewStore): a REST catalog's
	// server may send s3.* properties (in its config, in a table's load) that
	// iceberg-go's IO uses and the catalog properties do not hold. That
	// client has this transport too, through the ambient AWS config.
	TableIO bool
	// props are the properties the settings were built from (nil: not
	// built); ForTable adds a table's to them.
	props map[string]string
}

// s3Props are the client settings that properties alone decide.
type s3Props struct {
	endpoint  string
	pathStyle bool
	region    string
	creds     aws.CredentialsProvider // nil: the SDK's default chain
}

// parseProps checks and reads the S3 properties (see S3Settings).
func parseProps(props map[string]string) (s3Props, error) {
	if v, _ := strconv.ParseBool(props[PropS3RemoteSigning]); v {
		// iceberg-go refuses it too; an ambient config must not hide that.
		return s3Props{}, fmt.Errorf("%s: remote S3 request signing is not supported", PropS3RemoteSigning)
	}
	var p s3Props
	p.endpoint = props[PropS3Endpoint]
	if p.endpoint == "" {
		p.endpoint = os.Getenv("AWS_S3_ENDPOINT") // as iceberg-go
	}
	var err error
	if p.pathStyle, err = pathStyle(p.endpoint, props); err != nil {
		return s3Props{}, err
	}
	p.region = props[PropS3Region]
	if p.region == "" {
		p.region = props[PropClientRegion]
	}
	if p.creds, err = staticCredentials(props, PropS3AccessKeyID, PropS3SecretAccessKey, PropS3SessionToken); err != nil {
		return s3Props{}, err
	}
	return p, nil
}

// staticCredentials reads static credentials from the properties named key,
// secret and token: nil without any (the SDK's default chain); a key goes
// with its secret, and a session token only with both (iceberg-go refuses
// a lone token too, rather than fall back to the default chain).
func staticCredentials(props map[string]string, key, secret, token string) (aws.CredentialsProvider, error) {
	k, s, tok := props[key], props[secret], props[token]
	switch {
	case k != "" && s != "":
		return credentials.NewStaticCredentialsProvider(k, s, tok), nil
	case k != "" || s != "":
		return nil, fmt.Errorf("%s and %s must be set together", key, secret)
	case tok != "":
		return nil, fmt.Errorf("%s needs %s and %s", token, key, secret)
	}
	return nil, nil
}

// S3Settings builds S3 client settings from properties: the catalog's,
// with a table's s3.* filling what they leave out (see TableProps). The
// HTTP client, retryer and middleware come from t; with t nil, from the
// ambient AWS config of ctx (set by S3.Context), as iceberg-go's S3 IO takes
// them, so that the maintainer's client and iceberg-go's share them.
func S3Settings(ctx context.Context, t *Transport, props map[string]string) (S3, error) {
	p, err := parseProps(props)
	if err != nil {
		return S3{}, err
	}
	var opts []func(*awsconfig.LoadOptions) error
	if p.region != "" {
		opts = append(opts, awsconfig.WithRegion(p.region))
	}
	if p.creds != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(p.creds))
	}
	var proxy *url.URL
	if v := props[PropS3ProxyURI]; v != "" && t != nil {
		// iceberg-go reads it only without an ambient config.
		if proxy, err = url.Parse(v); err != nil {
			return S3{}, fmt.Errorf("%s=%q: %w", PropS3ProxyURI, v, err)
		}
	}
	// Every property is checked by now: what fails from here on is the
	// AWS environment (a profile, a config file).
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return S3{}, fmt.Errorf("%w: %w", ErrAWSEnvironment, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	switch ambient := utils.GetAwsConfig(ctx); {
	case t != nil:
		t.apply(&cfg, proxy)
	case ambient != nil:
		cfg.HTTPClient, cfg.Retryer, cfg.RetryMaxAttempts = ambient.HTTPClient, ambient.Retryer, ambient.RetryMaxAttempts
		cfg.APIOptions = append(cfg.APIOptions, ambient.APIOptions...)
	}
	built := maps.Clone(props)
	if built == nil {
		built = map[string]string{}
	}
	return S3{AWS: cfg, Endpoint: p.endpoint, PathStyle: p.pathStyle, props: built}, nil
}

// ForTable returns the settings for a table with properties table: s with
// the table's s3.* properties filling in what s's leave out (TableProps),
// applied to s's AWS config without reading the AWS environment again
// (start-up read it once). s must have been built by S3Settings.
func (s S3) ForTable(table map[string]string) (S3, error) {
	merged := TableProps(s.props, table)
	if len(merged) == len(s.props) {
		return s, nil // the table adds nothing
	}
	p, err := parseProps(merged)
	if err != nil {
		return S3{}, fmt.Errorf("table properties: %w", err)
	}
	out := s
	out.props, out.Endpoint, out.PathStyle = merged, p.endpoint, p.pathStyle
	if p.region != "" {
		out.AWS.Region = p.region
	}
	if p.creds != nil {
		out.AWS.Credentials = p.creds
	}
	return out, nil
}

// Built reports whether s holds settings S3Settings built.
func (s S3) Built() bool { return s.props != nil }

// pathStyle decides the addressing as iceberg-go does (path style with an
// endpoint, unless s3.force-virtual-addressing says otherwise), except that
// s3.path-style-access, when set, decides.
func pathStyle(endpoint string, props map[string]string) (bool, error) {
	ps := endpoint != ""
	if v, ok := props[PropS3ForceVirtualAddressing]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s=%q: %w", PropS3ForceVirtualAddressing, v, err)
		}
		ps = !b
	}
	if v, ok := props[PropS3PathStyleAccess]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s=%q: %w", PropS3PathStyleAccess, v, err)
		}
		ps = b
	}
	return ps, nil
}

// Client returns an S3 client with these settings.
func (s S3) Client(optFns ...func(*s3.Options)) *s3.Client {
	return s3.NewFromConfig(s.AWS, append([]func(*s3.Options){func(o *s3.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
		o.UsePathStyle = s.PathStyle
	}}, optFns...)...)
}

// Context returns ctx carrying s.AWS as iceberg-go's ambient AWS config:
// every iceberg-go S3 IO opened under it (a table's metadata read at load
// time, its data files later) uses s's HTTP client and retryer, and
// S3Settings(ctx, nil, ...) takes them from it.
func (s S3) Context(ctx context.Context) context.Context {
	cfg := s.AWS
	return utils.WithAwsConfig(ctx, &cfg)
}

// IcebergProps returns props with s3.path-style-access, which iceberg-go's
// S3 IO ignores, spelled as the s3.force-virtual-addressing it reads, so
// both clients address the bucket the same way. Without it the two decide
// alike already, and props are returned as they are.
func (s S3) IcebergProps(props map[string]string) map[string]string {
	if _, ok := props[PropS3PathStyleAccess]; !ok {
		return props
	}
	out := maps.Clone(props)
	out[PropS3ForceVirtualAddressing] = strconv.FormatBool(!s.PathStyle)
	return out
}

// TableProps returns the catalog properties with the table's s3.*
// properties filling in the keys they leave out.
func TableProps(catalog, table map[string]string) map[string]string {
	merged := maps.Clone(catalog)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range table {
		if _, ok := merged[k]; !ok && len(k) > 3 && k[:3] == "s3." {
			merged[k] = v
		}
	}
	return merged
}

// NewS3Client builds an S3 client from properties (see S3Settings).
func NewS3Client(ctx context.Context, t *Transport, props map[string]string, optFns ...func(*s3.Options)) (*s3.Client, error) {
	s, err := S3Settings(ctx, t, props)
	if err != nil {
		return nil, err
	}
	return s.Client(optFns...), nil
}
