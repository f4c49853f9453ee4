package objstore

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/resttest"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

// s3Table is a table at location with properties props, for NewStore.
func s3Table(t *testing.T, location string, props iceberg.Properties) *table.Table {
	t.Helper()
	sc := iceberg.NewSchema(1, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	meta, err := table.NewMetadata(sc, iceberg.UnpartitionedSpec, table.UnsortedSortOrder, location, props)
	if err != nil {
		t.Fatal(err)
	}
	return table.New(table.Identifier{"db", "t"}, meta, location+"/metadata/v1.metadata.json",
		func(ctx context.Context) (iceio.IO, error) { return nil, errors.New("not used") }, nil)
}

// The store of an S3 table starts from the settings built at start-up, with
// the table's s3.* properties (here its endpoint) filling in: the AWS
// environment, broken since start-up, is not read again. Built per table
// instead, the same store fails on that environment.
func TestNewStoreDoesNotReadTheAWSEnvironmentAgain(t *testing.T) {
	srv := s3test.Start(t, "warehouse")
	srv.Backend.PutObject("warehouse", "wh/t/data/a.parquet", nil, strings.NewReader("x"), 1, nil)
	catalogProps := srv.Props()
	delete(catalogProps, PropS3Endpoint)
	cfgFile := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfgFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_PROFILE", "")
	base, err := S3Settings(t.Context(), NewTransport(DefaultConfig(), nil), catalogProps)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "no-such-profile") // any load of the environment fails now
	tbl := s3Table(t, "s3://warehouse/wh/t", iceberg.Properties{PropS3Endpoint: srv.URL})
	store, err := NewStore(base.Context(t.Context()), tbl, base, catalogProps)
	if err != nil {
		t.Fatalf("NewStore with start-up settings: %v", err)
	}
	var listed []string
	for fi, err := range store.List(t.Context(), "s3://warehouse/wh/t", ListOptions{}) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		listed = append(listed, fi.Path)
	}
	if len(listed) != 1 || listed[0] != "s3://warehouse/wh/t/data/a.parquet" {
		t.Fatalf("listed %v through the table's endpoint", listed)
	}
	if _, err := NewStore(base.Context(t.Context()), tbl, S3{}, maps.Clone(catalogProps)); !errors.Is(err, ErrAWSEnvironment) {
		t.Fatalf("NewStore without start-up settings: err %v; want it to read the (broken) environment", err)
	}
}

// A REST catalog's server that sends the table's s3.* properties in its
// LoadTable answer (the catalog properties name no endpoint): the store of
// the table lists through the client of the table's IO, which has them.
func TestNewStoreUsesTheTableIOClientOfARESTTable(t *testing.T) {
	srv := s3test.Start(t, "warehouse")
	back := srv.SQLCatalog(t, "warehouse")
	ctx := t.Context()
	if err := back.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(1, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := back.CreateTable(ctx, table.Identifier{"db", "t"}, sc); err != nil {
		t.Fatal(err)
	}
	rs := resttest.Start(t, back, resttest.Config{Tokens: []string{"tok"}, TableConfig: srv.Props()})
	base, err := S3Settings(ctx, NewTransport(Config{RequestTimeout: 300 * time.Millisecond, MaxAttempts: 1}, nil), map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	base.TableIO = true
	ctx = base.Context(ctx)
	cat, err := catalog.Load(ctx, "r", iceberg.Properties{"type": "rest", "uri": rs.URL, "token": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"db", "t"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(ctx, tbl, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for fi, err := range store.List(ctx, tbl.Location(), ListOptions{}) {
		if err != nil {
			t.Fatalf("list %s: %v", tbl.Location(), err)
		}
		listed = append(listed, fi.Path)
	}
	if len(listed) != 1 || !strings.HasSuffix(listed[0], ".metadata.json") {
		t.Fatalf("listed %v; want the table's metadata file", listed)
	}
}
