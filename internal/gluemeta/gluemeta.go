// Package gluemeta reads where a Glue table's current metadata file is from
// Glue's own record of the table (its metadata_location parameter), without
// reading that file: orphan removal can then rule out a table that does not
// load, as it does with a SQL catalog's iceberg_tables.
package gluemeta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/glue/types"
)

// Locator reads tables' metadata_location from Glue.
type Locator struct {
	client    *awsglue.Client
	catalogID *string // glue.id; nil: the caller's account
	timeout   time.Duration
}

// New returns a Locator over cfg (the Glue catalog's AWS config, its
// glue.endpoint included); catalogID is glue.id ("" for the account's
// catalog); every request is bounded by timeout.
func New(cfg aws.Config, catalogID string, timeout time.Duration) *Locator {
	l := &Locator{client: awsglue.NewFromConfig(cfg), timeout: timeout}
	if catalogID != "" {
		l.catalogID = aws.String(catalogID)
	}
	return l
}

// MetadataLocation is the metadata_location parameter of the Glue table
// ident (database, table); "" when Glue has no such table or the table has
// no such parameter.
func (l *Locator) MetadataLocation(ctx context.Context, ident table.Identifier) (string, error) {
	if len(ident) != 2 {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	out, err := l.client.GetTable(ctx, &awsglue.GetTableInput{CatalogId: l.catalogID, DatabaseName: aws.String(ident[0]), Name: aws.String(ident[1])})
	var missing *types.EntityNotFoundException
	if errors.As(err, &missing) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the metadata location of %s from Glue: %w", strings.Join(ident, "."), err)
	}
	if out.Table == nil {
		return "", nil
	}
	return out.Table.Parameters["metadata_location"], nil
}
