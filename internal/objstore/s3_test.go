package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// locations
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

// syncBuffer is a log sink for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// settings builds the settings of props over a fresh transport with cfg,
// and the context that carries them to iceberg-go, as the command does.
func settings(t *testing.T, cfg Config, props map[string]string, log *slog.Logger) (context.Context, S3) {
	t.Helper()
	s, err := S3Settings(t.Context(), NewTransport(cfg, log), props)
	if err != nil {
		t.Fatal(err)
	}
	return s.Context(t.Context()), s
}

// With a host-name endpoint, s3.path-style-access decides how iceberg-go's
// IO and the maintainer's store address the bucket, the same way for both:
// "false" puts the bucket in the host name, "true" in the path.
func TestPathStyleAccessAddressesBothClientsAlike(t *testing.T) {
	for _, tc := range []struct{ pathStyle, wantHost string }{
		{"false", "warehouse." + s3test.VirtualHost},
		{"true", s3test.VirtualHost},
	} {
		t.Run("path-style-access="+tc.pathStyle, func(t *testing.T) {
			srv := s3test.Start(t, "warehouse")
			props := srv.HostnameProps()
			props[PropS3PathStyleAccess] = tc.pathStyle
			port := strings.TrimPrefix(props[PropS3Endpoint], "http://"+s3test.VirtualHost+":")
			want := tc.wantHost + ":" + port
			ctx, s := settings(t, DefaultConfig(), props, nil)

			// iceberg-go's IO, opened as a table's is: catalog properties
			// and the ambient config of the context.
			fs, err := iceio.LoadFS(ctx, s.IcebergProps(props), "s3://warehouse/wh")
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.(iceio.WriteFileIO).WriteFile("s3://warehouse/wh/t/metadata/v1.json", []byte("{}")); err != nil {
				t.Fatalf("iceberg-go IO write: %v", err)
			}
			if got := srv.Hosts(); !slices.Equal(slices.Collect(maps.Keys(got)), []string{want}) {
				t.Fatalf("iceberg-go's IO sent Host %v, want only %s", got, want)
			}
			srv.ResetCounts()

			// The store, built as NewStore builds it for a table.
			client, err := NewS3Client(ctx, nil, props)
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for fi, err := range NewS3Store(client).List(ctx, "s3://warehouse/wh", ListOptions{}) {
				if err != nil {
					t.Fatalf("store list: %v", err)
				}
				listed = append(listed, fi.Path)
			}
			if !slices.Equal(listed, []string{"s3://warehouse/wh/t/metadata/v1.json"}) {
				t.Fatalf("listed %v", listed)
			}
			if got := srv.Hosts(); !slices.Equal(slices.Collect(maps.Keys(got)), []string{want}) {
				t.Fatalf("the store sent Host %v, want only %s", got, want)
			}
		})
	}
}

func TestS3SettingsRefusesBadProperties(t *testing.T) {
	for _, props := range []map[string]string{
		{PropS3PathStyleAccess: "yes"},
		{PropS3ForceVirtualAddressing: "maybe"},
		{PropS3AccessKeyID: "k"},
		{PropS3SessionToken: "t"}, // iceberg-go's S3 IO refuses a lone token too
		{PropS3RemoteSigning: "true"},
		{PropS3ProxyURI: "http://[::1"},
	} {
		if _, err := S3Settings(t.Context(), NewTransport(DefaultConfig(), nil), props); err == nil {
			t.Errorf("%v: no error", props)
		}
	}
}

// A stalled server (it accepts requests and never answers) fails a listing
// within about request_timeout × max_attempts; each retry is logged with the
// request, and the error names the endpoint and the prefix.
func TestStalledStoreFailsListingInTime(t *testing.T) {
	srv := s3test.Start(t, "warehouse")
	srv.StallWhen(func(string, *http.Request) bool { return true })
	var logs syncBuffer
	cfg := Config{RequestTimeout: 300 * time.Millisecond, MaxAttempts: 3}
	ctx, s := settings(t, cfg, srv.Props(), slog.New(slog.NewTextHandler(&logs, nil)))
	start := time.Now()
	var err error
	for _, err = range NewS3Store(s.Client()).List(ctx, "s3://warehouse/wh/db/t", ListOptions{}) {
		if err != nil {
			break
		}
	}
	took := time.Since(start)
	if err == nil {
		t.Fatal("listing a stalled server succeeded")
	}
	if took > 20*time.Second {
		t.Errorf("took %s", took)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, w := range []string{host, "wh/db/t", "timeout"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if n := strings.Count(logs.String(), "object store request failed; retrying"); n != cfg.MaxAttempts-1 {
		t.Errorf("%d retries logged, want %d:\n%s", n, cfg.MaxAttempts-1, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "request=\"GET "+srv.URL+"/warehouse") {
		t.Errorf("the retry log does not name the request at warn:\n%s", logs.String())
	}
}

// rawServer answers every request with handle on a plain listener (so a
// test can stall or trickle the body); it closes when the test ends.
func rawServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(handle))
	t.Cleanup(srv.Close)
	return srv.URL
}

func getObject(ctx context.Context, s S3) ([]byte, error) {
	out, err := s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// request_timeout bounds progress, not the request: a body that keeps
// coming reads whole although it takes longer than the timeout, and one that
// stops part way fails, naming the request.
func TestRequestTimeoutBoundsProgress(t *testing.T) {
	const chunks = 8
	stop := make(chan struct{})
	url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(chunks*10))
		w.WriteHeader(http.StatusOK)
		for i := range chunks {
			if i == chunks/2 && r.Header.Get("X-Stall") != "" {
				select {
				case <-stop:
				case <-r.Context().Done(): // the client gave up
				}
				return
			}
			_, _ = w.Write(bytes.Repeat([]byte{'x'}, 10))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Cleanup(func() { close(stop) }) // before the server's Close waits for the handler
	props := map[string]string{PropS3Endpoint: url, PropS3AccessKeyID: "k", PropS3SecretAccessKey: "s", PropS3Region: "us-east-1"}
	cfg := Config{RequestTimeout: 300 * time.Millisecond, MaxAttempts: 2}
	ctx, s := settings(t, cfg, props, nil)
	start := time.Now()
	body, err := getObject(ctx, s)
	if err != nil || len(body) != chunks*10 {
		t.Fatalf("a body trickling in for %s: %d bytes, err %v", time.Since(start), len(body), err)
	}
	if took := time.Since(start); took < 2*cfg.RequestTimeout {
		t.Fatalf("the body took %s, not longer than the timeout: the test proves nothing", took)
	}

	stalled := s.Client(func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Build.Add(middleware.BuildMiddlewareFunc("stall", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				in.Request.(*smithyhttp.Request).Header.Set("X-Stall", "1")
				return next.HandleBuild(ctx, in)
			}), middleware.After)
		})
	})
	start = time.Now()
	out, err := stalled.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(out.Body)
	out.Body.Close()
	if err == nil || time.Since(start) > 20*time.Second {
		t.Fatalf("a body that stopped: err %v after %s", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "GET "+url+"/b/k") {
		t.Errorf("the error does not name the request: %v", err)
	}
}

// A refused connection is ErrUnreachable and names the endpoint; a server
// that answers (even with an error) is not.
func TestRefusedConnectionIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	props := map[string]string{PropS3Endpoint: "http://" + addr, PropS3AccessKeyID: "k", PropS3SecretAccessKey: "s"}
	ctx, s := settings(t, Config{RequestTimeout: time.Second, MaxAttempts: 2}, props, nil)
	_, err = getObject(ctx, s)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err %v; want ErrUnreachable naming %s", err, addr)
	}

	srv := s3test.Start(t, "b")
	srv.FailWhen(func(string, *http.Request) bool { return true })
	ctx, s = settings(t, DefaultConfig(), srv.Props(), nil)
	if _, err := getObject(ctx, s); err == nil || errors.Is(err, ErrUnreachable) {
		t.Fatalf("a 403: err %v; want an error that is not ErrUnreachable", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{RequestTimeout: time.Millisecond, MaxAttempts: 0}
	err := bad.Validate()
	for _, w := range []string{"request_timeout", "max_attempts"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate(%+v) = %v; want it to name %s", bad, err, w)
		}
	}
	if err := (Config{RequestTimeout: time.Second, MaxAttempts: 21}).Validate(); err == nil {
		t.Error("21 attempts accepted")
	}
}

// S3Store lists every object below a prefix in pages, in parallel below the
// top levels, yields a skipped folder instead of listing it, and deletes in
// DeleteObjects calls of at most MaxDeleteBatch keys, reporting each key a
// call could not delete.
func TestS3StoreListsAndDeletesInBatches(t *testing.T) {
	ctx := t.Context()
	srv := s3test.Start(t, "b")
	_, s := settings(t, DefaultConfig(), srv.Props(), nil)
	client := s.Client()
	put := func(key string) string {
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
		return "s3://b/" + key
	}
	var want []string
	for i := range 2100 {
		want = append(want, put(fmt.Sprintf("t/data/p=%d/%04d.parquet", i%3, i)))
	}
	want = append(want, put("t/metadata/v1.json"))
	put("t/data/_temporary/0/x.parquet")
	put("t/data/") // a folder marker is not a file

	store := NewS3Store(client)
	var got, skipped []string
	for fi, err := range store.List(ctx, "s3://b/t", ListOptions{Concurrency: 4, SkipDir: func(dir string) bool {
		return strings.HasSuffix(dir, "/_temporary")
	}}) {
		if err != nil {
			t.Fatal(err)
		}
		if fi.Dir {
			skipped = append(skipped, fi.Path)
			continue
		}
		if fi.Size != 1 || fi.ModTime.IsZero() {
			t.Errorf("%s: size %d, modified %s", fi.Path, fi.Size, fi.ModTime)
		}
		got = append(got, fi.Path)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Equal(skipped, []string{"s3://b/t/data/_temporary"}) {
		t.Fatalf("listed %d files (want %d), skipped %v", len(got), len(want), skipped)
	}

	srv.ResetCounts()
	deleted, failed := store.Delete(ctx, append(want[:2001:2001], "s3://b/t/data/gone.parquet", "not-a-location"))
	if len(deleted) != 2002 || len(failed) != 1 || failed["not-a-location"] == nil || srv.Count("DeleteObjects") != 3 {
		t.Fatalf("deleted %d, failed %v, %d DeleteObjects calls; want 2002 (a missing key counts), 1, 3", len(deleted), failed, srv.Count("DeleteObjects"))
	}
	srv.FailWhen(func(op string, _ *http.Request) bool { return op == "DeleteObjects" })
	deleted, failed = store.Delete(ctx, want[2001:])
	if len(deleted) != 0 || len(failed) != len(want)-2001 {
		t.Fatalf("a failing DeleteObjects: deleted %d, failed %d", len(deleted), len(failed))
	}
	for p, err := range failed {
		if !strings.Contains(err.Error(), "AccessDenied") {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// A catalog is on S3 by its properties when one is an s3.* key or its
// warehouse is an S3 location; a local or unnamed warehouse is not.
func TestUsesS3(t *testing.T) {
	for props, want := range map[*map[string]string]bool{
		{"warehouse": "s3://lake/wh"}:                     true,
		{"warehouse": "S3A://lake/wh"}:                    true,
		{"warehouse": "file:///data/wh", "s3.region": ""}: true,
		{"warehouse": "file:///data/wh", "uri": "x"}:      false,
		{"warehouse": "lake"}:                             false,
		{}:                                                false,
	} {
		if got := UsesS3(*props); got != want {
			t.Errorf("UsesS3(%v) = %v; want %v", *props, got, want)
		}
	}
}

// portWith301 returns a free local address whose port contains "301".
func portWith301(t *testing.T) string {
	t.Helper()
	for _, base := range []int{13010, 23010, 33010, 43010, 53010} {
		for p := base; p < base+10; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err == nil {
				addr := l.Addr().String()
				l.Close()
				return addr
			}
		}
	}
	t.Skip("no free port containing 301")
	return ""
}

// openThroughIceberg opens location through iceberg-go's S3 IO, as a table's
// metadata is read, and returns the error.
func openThroughIceberg(t *testing.T, cfg Config, props map[string]string, location string) error {
	t.Helper()
	ctx, s := settings(t, cfg, props, nil)
	fs, err := iceio.LoadFS(ctx, s.IcebergProps(props), location)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(location)
	if err == nil {
		f.Close()
	}
	return err
}

// Errors with "301" in their text (a port, a key, a request ID) reach the
// caller of iceberg-go's IO with their cause, not as a missing file: gocloud
// reads "301" in a failed S3 call as a missing bucket.
func TestErrorsWith301AreNotMissingFiles(t *testing.T) {
	cfg := Config{RequestTimeout: 300 * time.Millisecond, MaxAttempts: 2}
	keys := map[string]string{PropS3AccessKeyID: "k", PropS3SecretAccessKey: "s", PropS3Region: "us-east-1"}
	with := func(endpoint string) map[string]string {
		p := maps.Clone(keys)
		p[PropS3Endpoint] = endpoint
		return p
	}

	t.Run("refused on a port with 301", func(t *testing.T) {
		addr := portWith301(t)
		err := openThroughIceberg(t, cfg, with("http://"+addr), "s3://b/wh/t/metadata/v1.metadata.json")
		if err == nil || errors.Is(err, iofs.ErrNotExist) || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("err %v; want ErrUnreachable, connection refused, not a missing file", err)
		}
	})
	t.Run("503 with 301 in its request ID", func(t *testing.T) {
		url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-amz-request-id", "7E301A")
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		err := openThroughIceberg(t, cfg, with(url), "s3://b/wh/t/metadata/v1.metadata.json")
		if err == nil || errors.Is(err, iofs.ErrNotExist) || !strings.Contains(err.Error(), "StatusCode: 503") {
			t.Fatalf("err %v; want the 503, not a missing file", err)
		}
	})
	t.Run("connection reset reading a 00301 key", func(t *testing.T) {
		url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.(*net.TCPConn).SetLinger(0) // a reset, not an orderly close
				c.Close()
			}
		})
		err := openThroughIceberg(t, cfg, with(url), "s3://b/wh/t/metadata/00301-6a1f.metadata.json")
		if err == nil || errors.Is(err, iofs.ErrNotExist) || !strings.Contains(err.Error(), "reset") {
			t.Fatalf("err %v; want the reset, not a missing file", err)
		}
	})
	// A timeout is a deadline, which gocloud passes on unread: its text,
	// host and key included, is left as it is.
	t.Run("stalled read of a 00301 key", func(t *testing.T) {
		srv := s3test.Start(t, "warehouse")
		srv.StallWhen(func(_ string, r *http.Request) bool { return true })
		err := openThroughIceberg(t, cfg, srv.Props(), "s3://warehouse/wh/t/metadata/00301-6a1f.metadata.json")
		if err == nil || errors.Is(err, iofs.ErrNotExist) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v; want a deadline, not a missing file", err)
		}
		for _, w := range []string{srv.URL + "/warehouse/wh/t/metadata/00301-6a1f.metadata.json", "timeout"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, err)
			}
		}
	})
}

// A Glue catalog's static credentials are checked as iceberg-go's Glue
// catalog checks them: a key with its secret, a session token only with
// both; a lone token is refused, not dropped for the default chain.
func TestGlueAWSConfigRefusesIncompleteCredentials(t *testing.T) {
	s, err := S3Settings(t.Context(), NewTransport(DefaultConfig(), nil), map[string]string{PropS3Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, props := range []map[string]string{
		{"glue.access-key-id": "k"},
		{"glue.secret-access-key": "s"},
		{"glue.session-token": "t"},
	} {
		if _, err := s.GlueAWSConfig(t.Context(), props); err == nil {
			t.Errorf("%v: no error", props)
		}
	}
	cfg, err := s.GlueAWSConfig(t.Context(), map[string]string{"glue.access-key-id": "k", "glue.secret-access-key": "s", "glue.session-token": "t", "glue.region": "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || c.AccessKeyID != "k" || c.SessionToken != "t" || cfg.Region != "eu-west-1" {
		t.Fatalf("credentials %+v, region %s, err %v; want the static ones", c, cfg.Region, err)
	}
}
