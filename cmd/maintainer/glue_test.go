package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/catalogcall"
	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

// glueServer answers Glue's GetTable for any table with an Iceberg table
// whose metadata is metadataLocation; it closes when the test ends.
func glueServer(t *testing.T, metadataLocation string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AWSGlue.GetTable" {
			http.Error(w, "not faked: "+r.Header.Get("X-Amz-Target"), http.StatusNotImplemented)
			return
		}
		var in struct{ DatabaseName, Name string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if in.Name == "missing" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"EntityNotFoundException","Message":"Table missing not found."}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Table": map[string]any{
			"Name": in.Name, "DatabaseName": in.DatabaseName, "VersionId": "1", "TableType": "EXTERNAL_TABLE",
			"Parameters": map[string]string{"table_type": "ICEBERG", "metadata_location": metadataLocation},
		}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A Glue table's metadata is read with the object_store transport: a
// stalled object store fails the load in about request_timeout ×
// max_attempts, not when the caller's context ends. (iceberg-go reads it
// under the Glue catalog's AWS config, which the context's does not reach.)
func TestGlueTableMetadataReadHasObjectStoreTimeouts(t *testing.T) {
	store := s3test.Start(t, "warehouse")
	store.StallWhen(func(string, *http.Request) bool { return true })
	props := store.Props()
	props["type"] = config.CatalogGlue
	props[glue.Endpoint] = glueServer(t, "s3://warehouse/wh/db/t/metadata/00001-a.metadata.json")
	props[glue.Region] = s3test.Region
	props[glue.AccessKeyID], props[glue.SecretAccessKey] = s3test.AccessKeyID, s3test.SecretAccessKey
	ctx, cat := openGlue(t, props, 2)
	_, err := cat.LoadTable(ctx, table.Identifier{"db", "t"})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("load of a table on a stalled store: err %v, context %v; want the store's timeout before the context's", err, ctx.Err())
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), strings.TrimPrefix(store.URL, "http://")) {
		t.Fatalf("err %v; want a timeout naming the store", err)
	}
}

// glue.endpoint is Glue's endpoint only: a table's metadata on S3, with no
// s3.endpoint set, is not read from the Glue endpoint (the SDK's default
// S3 endpoint is unreachable here, so the load fails, elsewhere).
func TestGlueEndpointIsGluesOnly(t *testing.T) {
	var others atomic.Int64
	glueURL := glueServer(t, "s3://warehouse/wh/db/t/metadata/00001-a.metadata.json")
	spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "" {
			others.Add(1) // not a Glue API call: an S3 request
		}
		proxyTo(t, glueURL, w, r)
	}))
	t.Cleanup(spy.Close)
	props := map[string]string{
		"type":                 config.CatalogGlue,
		glue.Endpoint:          spy.URL,
		glue.Region:            s3test.Region,
		glue.AccessKeyID:       s3test.AccessKeyID,
		glue.SecretAccessKey:   s3test.SecretAccessKey,
		"s3.access-key-id":     s3test.AccessKeyID,
		"s3.secret-access-key": s3test.SecretAccessKey,
	}
	ctx, cat := openGlue(t, props, 1)
	_, err := cat.LoadTable(ctx, table.Identifier{"db", "t"})
	if err == nil {
		t.Fatal("the load of a table on an unreachable store succeeded")
	}
	if n := others.Load(); n > 0 {
		t.Fatalf("%d S3 requests went to glue.endpoint (load error: %v)", n, err)
	}
	if !strings.Contains(err.Error(), "GetObject") {
		t.Fatalf("load error %v; want the metadata read (GetObject) to fail, after Glue answered", err)
	}
}

// openGlue opens a Glue catalog of props over S3 settings whose requests
// time out in 300 ms, tried attempts times; its context ends with the test
// or in 30 s.
func openGlue(t *testing.T, props map[string]string, attempts int) (context.Context, catalog.Catalog) {
	t.Helper()
	s3, err := objstore.S3Settings(t.Context(), objstore.NewTransport(objstore.Config{RequestTimeout: 300 * time.Millisecond, MaxAttempts: attempts}, nil), props)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s3.Context(t.Context()), 30*time.Second)
	t.Cleanup(cancel)
	cat, err := loadCatalog(ctx, config.CatalogConfig{Name: "g", Type: config.CatalogGlue}, iceberg.Properties(props), s3)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cat
}

// proxyTo forwards r to the server at url.
func proxyTo(t *testing.T, url string, w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, url+r.URL.RequestURI(), r.Body)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// A Glue catalog's metadata locations are read from Glue (GetTable), so
// that orphan removal can rule out a Glue table that does not load by where
// its metadata is; a table Glue does not have has none ("": not ruled out).
func TestGlueLocatorReadsTheMetadataLocation(t *testing.T) {
	const loc = "s3://warehouse/wh/db/t/metadata/00001-a.metadata.json"
	props := map[string]string{glue.Endpoint: glueServer(t, loc), glue.Region: s3test.Region,
		glue.AccessKeyID: s3test.AccessKeyID, glue.SecretAccessKey: s3test.SecretAccessKey}
	s3, err := objstore.S3Settings(t.Context(), objstore.NewTransport(objstore.DefaultConfig(), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := config.CatalogConfig{Name: "g", Type: config.CatalogGlue, Props: props, Requests: catalogcall.DefaultConfig()}
	l := glueLocator(t.Context(), c, s3, slog.New(slog.DiscardHandler))
	if l == nil {
		t.Fatal("no locator for a Glue catalog")
	}
	if got, err := l.MetadataLocation(t.Context(), table.Identifier{"db", "t"}); err != nil || got != loc {
		t.Fatalf("metadata location %q, err %v; want %s", got, err, loc)
	}
	if got, err := l.MetadataLocation(t.Context(), table.Identifier{"db", "missing"}); err != nil || got != "" {
		t.Fatalf("a table Glue does not have: %q, err %v; want \"\"", got, err)
	}
	if glueLocator(t.Context(), config.CatalogConfig{Type: config.CatalogREST}, s3, nil) != nil {
		t.Fatal("a locator for a REST catalog")
	}
}
