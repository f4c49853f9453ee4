package objstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// GlueAWSConfig builds the AWS config of a Glue catalog from its glue.*
// properties (region, endpoint, credentials, max retries, retry mode), as
// iceberg-go's own registration of the Glue catalog does, with the HTTP
// client and middleware of s, the object_store transport, and its retryer
// unless glue.max-retries or glue.retry-mode say otherwise. iceberg-go puts a
// Glue catalog's AWS config on the context it reads a table's metadata with
// (when it loads the table and before each commit), so iceberg-go's S3 IO
// takes its client from this config: with the SDK's defaults that read has
// no timeout. The Glue requests use it too.
func (s S3) GlueAWSConfig(ctx context.Context, props map[string]string) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if v := props[glue.Region]; v != "" {
		opts = append(opts, awsconfig.WithRegion(v))
	}
	endpoint := props[glue.Endpoint] // set as Glue's own below; the config refuses it beside AWS_ENDPOINT_URL alone
	_, ownRetries := props[glue.MaxRetries]
	if v, ok := props[glue.MaxRetries]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return aws.Config{}, fmt.Errorf("%s=%q: %w", glue.MaxRetries, v, err)
		}
		opts = append(opts, awsconfig.WithRetryMaxAttempts(n))
	}
	if v, ok := props[glue.RetryMode]; ok {
		ownRetries = true
		m, err := aws.ParseRetryMode(v)
		if err != nil {
			return aws.Config{}, fmt.Errorf("%s=%q: %w", glue.RetryMode, v, err)
		}
		opts = append(opts, awsconfig.WithRetryMode(m))
	}
	creds, err := staticCredentials(props, glue.AccessKeyID, glue.SecretAccessKey, glue.SessionToken)
	if err != nil {
		return aws.Config{}, err
	}
	if creds != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(creds))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("%w: %w", ErrAWSEnvironment, err)
	}
	if endpoint != "" {
		// Glue's endpoint only: as the config's base endpoint it would be
		// every client's, and iceberg-go's S3 IO, built from this config,
		// would send the table's metadata reads to Glue's endpoint when no
		// s3.endpoint is set.
		cfg.ConfigSources = append([]any{glueEndpoint(endpoint)}, cfg.ConfigSources...)
	}
	cfg.HTTPClient = s.AWS.HTTPClient
	cfg.APIOptions = append(cfg.APIOptions, s.AWS.APIOptions...)
	if !ownRetries {
		cfg.Retryer, cfg.RetryMaxAttempts = s.AWS.Retryer, s.AWS.RetryMaxAttempts
	}
	return cfg, nil
}

// glueEndpoint is a config source that names the Glue service's endpoint
// and no other service's (the SDK's service-specific endpoint, as
// AWS_ENDPOINT_URL_GLUE).
type glueEndpoint string

func (g glueEndpoint) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	if sdkID == "Glue" {
		return string(g), true, nil
	}
	return "", false, nil
}
