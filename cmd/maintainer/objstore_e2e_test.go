package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

// s3Warehouse is a SQLite catalog (named "s3") whose table demo.events lives
// on an in-process S3 server.
type s3Warehouse struct {
	srv *s3test.Server
	dir string
	db  string
}

func newS3Warehouse(t *testing.T) *s3Warehouse {
	t.Helper()
	w := &s3Warehouse{srv: s3test.Start(t, "warehouse"), dir: t.TempDir()}
	w.db = filepath.Join(w.dir, "cat.db")
	cat := w.srv.SQLCatalogFile(t, "warehouse", w.db)
	if _, err := gen.Create(context.Background(), cat, gen.Options{Appends: 6, RowsPerAppend: 50, Partitions: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	w.srv.ResetCounts()
	return w
}

// config writes a config for the warehouse with endpoint as s3.endpoint and
// the given object_store block.
func (w *s3Warehouse) config(t *testing.T, endpoint, objectStore string) string {
	t.Helper()
	var props strings.Builder
	for k, v := range w.srv.Props() {
		if k == "s3.endpoint" {
			v = endpoint
		}
		fmt.Fprintf(&props, "    %s: %q\n", k, v)
	}
	return writeFile(t, filepath.Join(w.dir, "maintainer.yaml"), "catalog:\n  name: s3\n  type: sql\n"+
		"  uri: \""+sqliteuri.DSN(w.db)+"\"\n  warehouse: s3://warehouse/wh\n  properties:\n"+
		"    sql.driver: sqliteshim\n    sql.dialect: sqlite\n"+props.String()+objectStore)
}

// An S3 endpoint that refuses connections fails the first request of the
// run (loading the table's metadata): exit 3, naming the endpoint, as for an
// unreachable catalog; the outcomes say each task failed.
func TestObjectStoreUnreachableExit3(t *testing.T) {
	t.Parallel()
	w := newS3Warehouse(t)
	// gocloud's s3blob takes any error whose text holds "301" for a
	// missing bucket, and iceberg-go's IO then says "file does not exist",
	// dropping the cause: a port such as 46301 in the refused address would
	// turn this into a missing file. Such a port is not the case tested.
	var closed string
	for closed == "" || strings.Contains(closed, "301") {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed = l.Addr().String()
		l.Close()
	}
	cfg := w.config(t, "http://"+closed, "object_store:\n  request_timeout: 2s\n  max_attempts: 2\n")
	for _, args := range [][]string{{"run", "--force"}, {"run", "--force", "--task", "orphans"}, {"plan"}} {
		r := runMaintainer(t, w.dir, append(args, "--config", cfg, "--output", "json")...)
		expectCode(t, r, 3, strings.Join(args, " ")+" against a closed S3 port")
		for _, want := range []string{"error: ", closed, "object store unreachable"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, r.stderr)
			}
		}
		for _, o := range jsonLines[map[string]any](t, r.stdout) {
			if o["status"] != "failed" {
				t.Errorf("%v: outcome %v", args, o)
			}
		}
	}
	if n := w.srv.Count("PutObject") + w.srv.Count("DeleteObjects"); n != 0 {
		t.Errorf("%d writes reached the real server", n)
	}
}

// A stalled object store (it takes requests and never answers) fails the
// task within about request_timeout × max_attempts, for compaction's reads
// and writes and for orphan listing: exit 1, an error naming the endpoint
// and the object, and a warning for each retry while it waits.
func TestStalledObjectStoreFailsTheTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		task   string
		stall  func(op string, r *http.Request) bool
		object string // in the error
	}{
		{"compaction reads", "compact", func(op string, r *http.Request) bool {
			return op == "GetObject" && strings.HasSuffix(r.URL.Path, ".parquet")
		}, ".parquet"},
		{"compaction writes", "compact", func(op string, r *http.Request) bool {
			return op == "PutObject" && strings.HasSuffix(r.URL.Path, ".parquet")
		}, ".parquet"},
		{"orphan listing", "orphans", func(op string, _ *http.Request) bool { return op == "ListObjectsV2" }, "warehouse/wh/demo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newS3Warehouse(t)
			cfg := w.config(t, w.srv.URL, "object_store:\n  request_timeout: 300ms\n  max_attempts: 3\n")
			w.srv.StallWhen(tc.stall)
			start := time.Now()
			r := runMaintainer(t, w.dir, "run", "--force", "--task", tc.task, "--config", cfg, "--output", "json")
			took := time.Since(start)
			expectCode(t, r, 1, tc.name+" stalled")
			if took > 30*time.Second {
				t.Errorf("the run took %s", took)
			}
			host := strings.TrimPrefix(w.srv.URL, "http://")
			out := jsonLines[map[string]any](t, r.stdout)
			if len(out) != 1 || out[0]["status"] != "failed" {
				t.Fatalf("outcomes %v\n%s", out, r)
			}
			msg, _ := out[0]["error"].(string)
			for _, want := range []string{host, tc.object} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error lacks %q: %s", want, msg)
				}
			}
			if !strings.Contains(r.stderr, "level=WARN msg=\"object store request failed; retrying\"") ||
				!regexp.MustCompile(`request="(GET|PUT) `+regexp.QuoteMeta(w.srv.URL)+`/warehouse`).MatchString(r.stderr) {
				t.Errorf("no retry warning naming the request:\n%s", r.stderr)
			}
		})
	}
}
