// Package s3test starts an in-process S3-protocol server (gofakes3 with its
// in-memory backend, behind httptest) for tests that make real aws-sdk-go-v2
// calls over HTTP. It counts requests by S3 operation, can fail chosen
// requests, can stall chosen requests (no answer until the client gives up),
// records the Host header of every request, routes virtual-hosted requests
// (bucket.VirtualHost) as path-style ones, and has a clock the test
// advances, so that object modification times can be made old without
// sleeping.
//
// Only tests import this package.
package s3test

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// locations
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

// Credentials and region the server accepts (it does not check them).
const (
	AccessKeyID     = "test-access-key"
	SecretAccessKey = "test-secret-key"
	Region          = "us-east-1"
	// VirtualHost is the host name of HostnameProps' endpoint: a request
	// for bucket.VirtualHost is a virtual-hosted request for bucket.
	VirtualHost = "s3.test"
)

// Server is a running fake S3.
type Server struct {
	URL     string // http://127.0.0.1:port, the s3.endpoint
	Clock   *Clock // the time the backend stamps objects with
	Backend *s3mem.Backend

	mu     sync.Mutex
	counts map[string]int
	hosts  map[string]int
	fail   func(op string, r *http.Request) bool
	stall  func(op string, r *http.Request) bool
	// stopped ends stalled requests when the test ends.
	stopped chan struct{}
}

// Start starts a server with the given buckets; it stops when the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s := &Server{Clock: NewClock(time.Now()), counts: map[string]int{}, hosts: map[string]int{}, stopped: make(chan struct{})}
	s.Backend = s3mem.New(s3mem.WithTimeSource(s.Clock))
	faker := gofakes3.New(s.Backend, gofakes3.WithTimeSkewLimit(0), gofakes3.WithTimeSource(s.Clock))
	inner := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if bucket, ok := strings.CutSuffix(host, "."+VirtualHost); ok {
			r.URL.Path = "/" + bucket + r.URL.Path
		}
		op := Op(r)
		s.mu.Lock()
		s.counts[op]++
		s.hosts[r.Host]++
		fail, stall := s.fail, s.stall
		s.mu.Unlock()
		if stall != nil && stall(op, r) {
			select {
			case <-r.Context().Done(): // the client gave up
			case <-s.stopped:
			}
			return
		}
		if fail != nil && fail(op, r) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>injected failure</Message></Error>`))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.stopped) }) // before srv.Close waits for the handlers
	s.URL = srv.URL
	for _, b := range buckets {
		if err := s.Backend.CreateBucket(b); err != nil {
			t.Fatalf("s3test: create bucket %s: %v", b, err)
		}
	}
	return s
}

// Props are the iceberg-go (and maintainer) properties that reach the server.
func (s *Server) Props() map[string]string {
	return map[string]string{
		"s3.endpoint":          s.URL,
		"s3.region":            Region,
		"s3.access-key-id":     AccessKeyID,
		"s3.secret-access-key": SecretAccessKey,
		"s3.path-style-access": "true",
	}
}

// HostnameProps are Props with a host-name endpoint, http://VirtualHost:port,
// reached through the server as an HTTP proxy (s3.proxy-uri), since the
// name does not resolve: the Host header then says how a client addressed
// the bucket. s3.path-style-access is left out: the caller chooses.
func (s *Server) HostnameProps() map[string]string {
	p := s.Props()
	u, err := url.Parse(s.URL)
	if err != nil {
		panic(err)
	}
	p["s3.endpoint"] = "http://" + VirtualHost + ":" + u.Port()
	p["s3.proxy-uri"] = s.URL
	delete(p, "s3.path-style-access")
	return p
}

// Hosts returns the Host headers of the requests so far, with their counts.
func (s *Server) Hosts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.hosts)
}

// SQLCatalog loads a SQL catalog named "s3" on a fresh SQLite file whose
// warehouse is s3://bucket/wh on the server; it closes when the test ends.
func (s *Server) SQLCatalog(t testing.TB, bucket string) *sqlcat.Catalog {
	t.Helper()
	return s.SQLCatalogFile(t, bucket, filepath.Join(t.TempDir(), "cat.db"))
}

// SQLCatalogFile is SQLCatalog on the SQLite file db.
func (s *Server) SQLCatalogFile(t testing.TB, bucket, db string) *sqlcat.Catalog {
	t.Helper()
	props := s.Props()
	props["type"] = "sql"
	props["uri"] = sqliteuri.DSN(db)
	props[sqlcat.DriverKey] = sqliteshim.ShimName
	props[sqlcat.DialectKey] = string(sqlcat.SQLite)
	props["warehouse"] = "s3://" + bucket + "/wh"
	props["init_catalog_tables"] = "true"
	c, err := catalog.Load(context.Background(), "s3", props)
	if err != nil {
		t.Fatalf("s3test: load the SQL catalog: %v", err)
	}
	cat := c.(*sqlcat.Catalog)
	t.Cleanup(func() { cat.Close() })
	return cat
}

// Keys returns the keys of every object in bucket, read from the backend
// (no request is counted).
func (s *Server) Keys(t testing.TB, bucket string) map[string]bool {
	t.Helper()
	list, err := s.Backend.ListBucket(bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatalf("s3test: list %s: %v", bucket, err)
	}
	keys := make(map[string]bool, len(list.Contents))
	for _, c := range list.Contents {
		keys[c.Key] = true
	}
	return keys
}

// Count returns the number of requests of operation op (see Op) so far.
func (s *Server) Count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// ResetCounts zeroes the request counters.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = map[string]int{}
	s.hosts = map[string]int{}
}

// FailWhen makes every request for which fail returns true answer 403
// AccessDenied (not retried by the SDK); nil stops failing.
func (s *Server) FailWhen(fail func(op string, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

// StallWhen makes every request for which stall returns true wait without
// an answer until the client closes its connection (as a SIGSTOP'd server
// would) or the test ends; nil stops stalling.
func (s *Server) StallWhen(stall func(op string, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = stall
}

// Op names the S3 operation of a path-style request: ListObjectsV2,
// ListObjects, DeleteObjects, DeleteObject, PutObject, GetObject, HeadObject,
// or the method and "bucket"/"object" for anything else.
func Op(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	isObject := strings.Contains(strings.TrimSuffix(path, "/"), "/")
	q := r.URL.Query()
	switch {
	case !isObject && r.Method == http.MethodGet && q.Get("list-type") == "2":
		return "ListObjectsV2"
	case !isObject && r.Method == http.MethodGet && path != "":
		return "ListObjects"
	case !isObject && r.Method == http.MethodPost && q.Has("delete"):
		return "DeleteObjects"
	case isObject && r.Method == http.MethodDelete:
		return "DeleteObject"
	case isObject && r.Method == http.MethodPut:
		return "PutObject"
	case isObject && r.Method == http.MethodGet:
		return "GetObject"
	case isObject && r.Method == http.MethodHead:
		return "HeadObject"
	case isObject:
		return r.Method + " object"
	default:
		return r.Method + " bucket"
	}
}

// Clock is a settable, concurrency-safe gofakes3.TimeSource.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Since returns Now() - t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
