package main

import (
	"context"
	"log/slog"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gluemeta"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
)

// loadCatalog opens the catalog through iceberg-go's registry, except a
// Glue catalog when start-up built S3 settings: that one is built here over
// an AWS config with the object_store transport (objstore.S3.GlueAWSConfig),
// since iceberg-go reads a Glue table's metadata under the catalog's own AWS
// config, not under the context's.
func loadCatalog(ctx context.Context, c config.CatalogConfig, props iceberg.Properties, s3 objstore.S3) (catalog.Catalog, error) {
	if c.Type != config.CatalogGlue || !s3.Built() {
		return catalog.Load(ctx, c.Name, props)
	}
	cfg, err := s3.GlueAWSConfig(ctx, props)
	if err != nil {
		return nil, err
	}
	return glue.NewCatalog(glue.WithAwsConfig(cfg), glue.WithAwsProperties(glue.AwsProperties(props)))
}

// glueLocator reads a Glue catalog's tables' metadata locations from Glue
// (nil for other catalogs, or without S3 settings): orphan removal then
// rules out a Glue table that does not load by where its metadata is.
func glueLocator(ctx context.Context, c config.CatalogConfig, s3 objstore.S3, log *slog.Logger) *gluemeta.Locator {
	if c.Type != config.CatalogGlue || !s3.Built() {
		return nil
	}
	props := c.Properties()
	cfg, err := s3.GlueAWSConfig(ctx, props)
	if err != nil {
		log.Debug("Glue metadata locations not read directly", "err", err)
		return nil
	}
	return gluemeta.New(cfg, props[glue.CatalogIdKey], c.Requests.RequestTimeout)
}
