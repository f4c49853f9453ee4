package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iceberg-maintainer/maintainer/metrics"
)

// testTasks are the task names the tests' servers accept, in run order.
var testTasks = []string{"compact", "expire", "orphans"}

// fakeQueue records what the server enqueues and answers like the scheduler:
// unknown tables are refused, a second request for a queued table is a
// duplicate.
type fakeQueue struct {
	mu     sync.Mutex
	known  map[string]bool
	reqs   []Request
	queued map[string]bool
	err    error         // returned by Enqueue when set
	block  chan struct{} // when set, Enqueue waits for it (or ctx)
	// entered receives a value each time Enqueue starts, when set.
	entered chan struct{}
	status  any
	// deadlines are the deadlines of Enqueue's contexts (zero: none).
	deadlines []time.Time
	state     string // the State of every answer, when set
}

func newFakeQueue(tables ...string) *fakeQueue {
	q := &fakeQueue{known: map[string]bool{}, queued: map[string]bool{}}
	for _, t := range tables {
		q.known[t] = true
	}
	return q
}

func (q *fakeQueue) Enqueue(ctx context.Context, r Request) (Enqueued, error) {
	if q.entered != nil {
		q.entered <- struct{}{}
	}
	if q.block != nil {
		select {
		case <-q.block:
		case <-ctx.Done():
			return Enqueued{}, ctx.Err()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	dl, _ := ctx.Deadline()
	q.deadlines = append(q.deadlines, dl)
	if q.err != nil {
		return Enqueued{}, q.err
	}
	if !q.known[r.Table] {
		return Enqueued{}, fmt.Errorf("enqueue %s: %w", r.Table, ErrUnknownTable)
	}
	q.reqs = append(q.reqs, r)
	tasks := r.Tasks
	if len(tasks) == 0 {
		tasks = slices.Clone(testTasks)
	}
	dup := q.queued[r.Table]
	q.queued[r.Table] = true
	return Enqueued{Table: r.Table, Tasks: tasks, Duplicate: dup, State: q.state}, nil
}

func (q *fakeQueue) Known(table string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.known[table]
}

func (q *fakeQueue) Status() any { return q.status }

func (q *fakeQueue) requests() []Request {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.reqs)
}

type testEnv struct {
	srv *Server
	q   *fakeQueue
	reg *prometheus.Registry
}

func newEnv(t *testing.T, cfg Config, q *fakeQueue, ready map[string]func(context.Context) error) testEnv {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(cfg, Deps{Queue: q, Tasks: testTasks, Ready: ready, Gatherer: reg, Registerer: reg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return testEnv{srv: s, q: q, reg: reg}
}

// do sends a request to the handler and returns the recorded response.
func (e testEnv) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(w, req)
	return w
}

func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("response %d is not JSON: %v\n%s", w.Code, err, w.Body)
	}
	return v
}

// triggerCount is the trigger_requests_total series for source and result.
func (e testEnv) triggerCount(source, result string) float64 {
	return testutil.ToFloat64(e.srv.m.triggers.WithLabelValues(source, result))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTrigger(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		queueErr  error
		wantCode  int
		wantInErr []string // substrings of the error message
		wantReq   *Request // what the queue must have received
		result    string   // trigger_requests_total result
	}{
		{
			name:     "all tasks",
			body:     `{"table": "sales.orders", "reason": "backfill done"}`,
			wantCode: http.StatusAccepted,
			wantReq:  &Request{Table: "sales.orders", Reason: "backfill done", Source: SourceHTTP},
			result:   resultQueued,
		},
		{
			name:     "tasks normalized to run order without duplicates, force kept",
			body:     `{"table": "sales.orders", "tasks": ["orphans", "compact", "orphans"], "force": true}`,
			wantCode: http.StatusAccepted,
			wantReq:  &Request{Table: "sales.orders", Tasks: []string{"compact", "orphans"}, Force: true, Source: SourceHTTP},
			result:   resultQueued,
		},
		{
			name:      "malformed JSON names the offset",
			body:      `{"table": "sales.orders",, }`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"malformed JSON at byte 26"},
			result:    resultRejected,
		},
		{
			name:      "truncated JSON",
			body:      `{"table": "sales.or`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"malformed JSON"},
			result:    resultRejected,
		},
		{
			name:      "unknown field",
			body:      `{"table": "sales.orders", "taks": ["compact"]}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`unknown field "taks"`},
			result:    resultRejected,
		},
		{
			name:      "wrong type",
			body:      `{"table": "sales.orders", "tasks": "compact"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"tasks", "string"},
			result:    resultRejected,
		},
		{
			name:      "source cannot be set by the client",
			body:      `{"table": "sales.orders", "Source": "alertmanager"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`unknown field "Source"`},
			result:    resultRejected,
		},
		{
			name:      "two JSON values",
			body:      `{"table": "sales.orders"} {"table": "web.events"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"unexpected data after the JSON value, at byte 27"},
			result:    resultRejected,
		},
		{
			name:      "empty body",
			body:      ``,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"empty"},
			result:    resultRejected,
		},
		{
			name:      "missing table",
			body:      `{"tasks": ["compact"]}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`"table" is required`},
			result:    resultRejected,
		},
		{
			name:      "unknown task",
			body:      `{"table": "sales.orders", "tasks": ["compact", "vacuum"]}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`"vacuum"`, "compact, expire, orphans"},
			result:    resultRejected,
		},
		{
			name:      "unknown table",
			body:      `{"table": "sales.nope"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"sales.nope", "unknown table"},
			result:    resultRejected,
		},
		{
			name:     "where, trimmed, with a relative date kept as written",
			body:     `{"table": "sales.orders", "tasks": ["compact"], "where": "  dt = current_date - 1 "}`,
			wantCode: http.StatusAccepted,
			wantReq:  &Request{Table: "sales.orders", Tasks: []string{"compact"}, Where: "dt = current_date - 1", Source: SourceHTTP},
			result:   resultQueued,
		},
		{
			name:      "bad where names the problem, nothing queued",
			body:      `{"table": "sales.orders", "where": "dt = current_date -"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`field "where": expected a number of days or INTERVAL after "-" at position 20, got end of input`},
			result:    resultRejected,
		},
		{
			name:      "blank where is refused, not taken for no scope",
			body:      `{"table": "sales.orders", "tasks": ["compact"], "where": "  "}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`field "where" is empty; leave it out to ask for a run without a scope`},
			result:    resultRejected,
		},
		{
			name:      "where of the wrong type names the field",
			body:      `{"table": "sales.orders", "where": 5}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"field where near byte"},
			result:    resultRejected,
		},
		{
			name:      "where that is no filter",
			body:      `{"table": "sales.orders", "where": "dt"}`,
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{`field "where": expected a comparison operator`},
			result:    resultRejected,
		},
		{
			name:      "queue refuses the scope",
			body:      `{"table": "sales.orders", "tasks": ["expire"], "where": "dt = current_date - 1"}`,
			queueErr:  fmt.Errorf("where scopes compaction only: %w", ErrBadRequest),
			wantCode:  http.StatusBadRequest,
			wantInErr: []string{"where scopes compaction only"},
			result:    resultRejected,
		},
		{
			name:      "queue stopping",
			body:      `{"table": "sales.orders"}`,
			queueErr:  fmt.Errorf("enqueue: %w", ErrStopping),
			wantCode:  http.StatusServiceUnavailable,
			wantInErr: []string{"shutting down"},
			result:    resultError,
		},
		{
			name:      "queue failure",
			body:      `{"table": "sales.orders"}`,
			queueErr:  errors.New("boom"),
			wantCode:  http.StatusInternalServerError,
			wantInErr: []string{"boom"},
			result:    resultError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newFakeQueue("sales.orders", "web.events")
			q.err = tt.queueErr
			e := newEnv(t, DefaultConfig(), q, nil)
			w := e.do(http.MethodPost, "/v1/trigger", tt.body, "Content-Type", "application/json")
			if w.Code != tt.wantCode {
				t.Fatalf("code = %d, want %d; body %s", w.Code, tt.wantCode, w.Body)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if tt.wantCode == http.StatusAccepted {
				resp := decode[triggerResponse](t, w)
				if len(resp.Queued) != 1 || resp.Queued[0].Table != tt.wantReq.Table || resp.Queued[0].Duplicate {
					t.Errorf("response = %+v", resp)
				}
			} else {
				msg := decode[errorBody](t, w).Error
				for _, s := range tt.wantInErr {
					if !strings.Contains(msg, s) {
						t.Errorf("error %q does not contain %q", msg, s)
					}
				}
			}
			got := q.requests()
			switch {
			case tt.wantReq == nil && len(got) != 0:
				t.Errorf("enqueued %+v, want nothing", got)
			case tt.wantReq != nil && (len(got) != 1 || !reqEqual(got[0], *tt.wantReq)):
				t.Errorf("enqueued %+v, want %+v", got, *tt.wantReq)
			}
			if n := e.triggerCount(SourceHTTP, tt.result); n != 1 {
				t.Errorf("trigger_requests_total{source=http,result=%s} = %v, want 1", tt.result, n)
			}
		})
	}
}

func reqEqual(a, b Request) bool {
	return a.Table == b.Table && slices.Equal(a.Tasks, b.Tasks) && a.Reason == b.Reason && a.Force == b.Force && a.Source == b.Source &&
		a.Where == b.Where
}

func TestTriggerDuplicateAndMetrics(t *testing.T) {
	e := newEnv(t, DefaultConfig(), newFakeQueue("sales.orders"), nil)
	for range 2 {
		if w := e.do(http.MethodPost, "/v1/trigger", `{"table":"sales.orders"}`); w.Code != http.StatusAccepted {
			t.Fatalf("code %d: %s", w.Code, w.Body)
		}
	}
	w := e.do(http.MethodPost, "/v1/trigger", `{"table":"sales.orders"}`)
	if resp := decode[triggerResponse](t, w); !resp.Queued[0].Duplicate {
		t.Errorf("third request not reported as duplicate: %+v", resp)
	}
	e.do(http.MethodPost, "/v1/trigger", `{"table":"nope"}`)

	// The family's help text belongs to package metrics; take it from there.
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := ""
	for _, mf := range mfs {
		if mf.GetName() == "iceberg_maintainer_trigger_requests_total" {
			help = mf.GetHelp()
		}
	}
	want := `
# HELP iceberg_maintainer_trigger_requests_total ` + help + `
# TYPE iceberg_maintainer_trigger_requests_total counter
iceberg_maintainer_trigger_requests_total{result="duplicate",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="duplicate",source="http"} 2
iceberg_maintainer_trigger_requests_total{result="error",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="error",source="http"} 0
iceberg_maintainer_trigger_requests_total{result="held",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="held",source="http"} 0
iceberg_maintainer_trigger_requests_total{result="ignored",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="queued",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="queued",source="http"} 1
iceberg_maintainer_trigger_requests_total{result="rejected",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="rejected",source="http"} 1
iceberg_maintainer_trigger_requests_total{result="unauthorized",source="alertmanager"} 0
iceberg_maintainer_trigger_requests_total{result="unauthorized",source="http"} 0
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "iceberg_maintainer_trigger_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(e.srv.m.requests.WithLabelValues("trigger", "202")); n != 3 {
		t.Errorf(`http_requests_total{handler="trigger",code="202"} = %v, want 3`, n)
	}
	if n := testutil.ToFloat64(e.srv.m.requests.WithLabelValues("trigger", "400")); n != 1 {
		t.Errorf(`http_requests_total{handler="trigger",code="400"} = %v, want 1`, n)
	}
	if n := testutil.CollectAndCount(e.srv.m.duration, "iceberg_maintainer_http_request_duration_seconds"); n != 1 {
		t.Errorf("duration series = %d, want 1 (handler=trigger)", n)
	}
}

// TestSharedTriggerFamily: the scheduler registers the same family on the
// same registry (source "poll"); New must join it, not panic.
func TestSharedTriggerFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.TriggerRequests(reg).WithLabelValues("poll", resultQueued).Inc()
	s, err := New(DefaultConfig(), Deps{Queue: newFakeQueue("sales.orders"), Tasks: testTasks, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	e := testEnv{srv: s, reg: reg}
	if w := e.do(http.MethodPost, "/v1/trigger", `{"table":"sales.orders"}`); w.Code != http.StatusAccepted {
		t.Fatalf("code %d", w.Code)
	}
	fam := metrics.TriggerRequests(reg)
	if p, h := testutil.ToFloat64(fam.WithLabelValues("poll", resultQueued)), testutil.ToFloat64(fam.WithLabelValues(SourceHTTP, resultQueued)); p != 1 || h != 1 {
		t.Errorf("poll queued = %v, http queued = %v; want 1 and 1", p, h)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, DefaultConfig(), newFakeQueue("sales.orders"), nil)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/trigger", "POST"},
		{http.MethodPut, "/v1/alertmanager", "POST"},
		{http.MethodPost, "/v1/status", "GET, HEAD"},
		{http.MethodPost, "/readyz", "GET, HEAD"},
	} {
		w := e.do(tc.method, tc.path, "")
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: code %d Allow %q, want 405 %q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), tc.allow)
		}
		if msg := decode[errorBody](t, w).Error; !strings.Contains(msg, tc.method) {
			t.Errorf("%s %s: error %q does not name the method", tc.method, tc.path, msg)
		}
	}
	if len(e.q.requests()) != 0 {
		t.Errorf("enqueued %+v", e.q.requests())
	}
	if n := e.triggerCount(SourceHTTP, resultRejected); n != 1 {
		t.Errorf("http rejected = %v, want 1", n)
	}
}

func TestBodyTooLarge(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 1024
	e := newEnv(t, cfg, newFakeQueue("sales.orders"), nil)
	big := `{"table": "sales.orders", "reason": "` + strings.Repeat("x", 2000) + `"}`

	// Content-Length known: refused before reading.
	if w := e.do(http.MethodPost, "/v1/trigger", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("with Content-Length: code %d, want 413: %s", w.Code, w.Body)
	}
	// Chunked (length unknown): refused while reading.
	req := httptest.NewRequest(http.MethodPost, "/v1/alertmanager", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	w := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: code %d, want 413: %s", w.Code, w.Body)
	}
	if msg := decode[errorBody](t, w).Error; !strings.Contains(msg, "1024") {
		t.Errorf("error %q does not name the limit", msg)
	}
	if len(e.q.requests()) != 0 {
		t.Errorf("enqueued %+v", e.q.requests())
	}
	// A body just under the limit still works.
	ok := `{"table": "sales.orders", "reason": "` + strings.Repeat("x", 900) + `"}`
	if w := e.do(http.MethodPost, "/v1/trigger", ok); w.Code != http.StatusAccepted {
		t.Errorf("body under the limit: code %d: %s", w.Code, w.Body)
	}
}

func TestAuth(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "s3cret-token\n") // trailing newline as `kubectl create secret --from-file` keeps it
	cfg := DefaultConfig()
	cfg.TokenFile = tokenFile
	q := newFakeQueue("sales.orders")
	q.status = map[string]any{"queue": []string{"sales.orders"}}
	e := newEnv(t, cfg, q, nil)

	body := `{"table":"sales.orders"}`
	for _, tc := range []struct {
		name, path, auth string
		wantCode         int
		wantChallenge    string
	}{
		{"trigger without token", "/v1/trigger", "", 401, `Bearer realm="maintainer"`},
		{"trigger wrong token", "/v1/trigger", "Bearer s3cret-tokeN", 401, `Bearer realm="maintainer", error="invalid_token"`},
		{"trigger token prefix", "/v1/trigger", "Bearer s3cret", 401, `Bearer realm="maintainer", error="invalid_token"`},
		{"trigger basic auth", "/v1/trigger", "Basic czNjcmV0LXRva2Vu", 401, `Bearer realm="maintainer"`},
		{"alertmanager without token", "/v1/alertmanager", "", 401, `Bearer realm="maintainer"`},
		{"status without token", "/v1/status", "", 401, `Bearer realm="maintainer"`},
		{"trigger right token", "/v1/trigger", "Bearer s3cret-token", 202, ""},
		{"scheme is case-insensitive", "/v1/trigger", "bearer s3cret-token", 202, ""},
		{"status right token", "/v1/status", "Bearer s3cret-token", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, b := http.MethodPost, body
			if tc.path == "/v1/status" {
				method, b = http.MethodGet, ""
			}
			if tc.path == "/v1/alertmanager" {
				b = `{"version":"4","alerts":[]}`
			}
			w := e.do(method, tc.path, b, "Authorization", tc.auth)
			if w.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tc.wantCode, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.wantChallenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.wantChallenge)
			}
			if strings.Contains(w.Body.String(), "s3cret") {
				t.Errorf("response leaks the token: %s", w.Body)
			}
		})
	}
	if n := len(q.requests()); n != 2 {
		t.Errorf("enqueued %d requests, want 2 (only the authorized ones)", n)
	}
	if n := e.triggerCount(SourceHTTP, resultUnauthorized); n != 4 {
		t.Errorf("http unauthorized = %v, want 4", n)
	}
	if n := e.triggerCount(SourceAlertmanager, resultUnauthorized); n != 1 {
		t.Errorf("alertmanager unauthorized = %v, want 1", n)
	}
	// Probes and scraping need no token.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if w := e.do(http.MethodGet, p, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s without token: %d", p, w.Code)
		}
	}
}

func TestTokenFileRotation(t *testing.T) {
	dir := t.TempDir()
	// Kubernetes mounts a secret as token -> ..data/token with ..data a
	// symlink to a timestamped directory that is swapped atomically.
	mkVersion := func(name, token string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "token"), token)
	}
	swap := func(name string) {
		t.Helper()
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mkVersion("..v1", "first-token")
	swap("..v1")
	tokenFile := filepath.Join(dir, "token")
	if err := os.Symlink(filepath.Join("..data", "token"), tokenFile); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TokenFile = tokenFile
	e := newEnv(t, cfg, newFakeQueue("sales.orders"), nil)
	trigger := func(token string) int {
		return e.do(http.MethodPost, "/v1/trigger", `{"table":"sales.orders"}`, "Authorization", "Bearer "+token).Code
	}
	if c := trigger("first-token"); c != 202 {
		t.Fatalf("first token: %d", c)
	}

	// Same length, so only the file identity tells the change.
	mkVersion("..v2", "other-token")
	swap("..v2")
	if c := trigger("first-token"); c != 401 {
		t.Errorf("old token after symlink rotation: %d, want 401", c)
	}
	if c := trigger("other-token"); c != 202 {
		t.Errorf("new token after symlink rotation: %d, want 202", c)
	}

	// In-place rewrite of a plain file, same size, mtime moved.
	plain := filepath.Join(t.TempDir(), "token")
	writeFile(t, plain, "aaaa")
	cfg.TokenFile = plain
	e = newEnv(t, cfg, newFakeQueue("sales.orders"), nil)
	if c := trigger("aaaa"); c != 202 {
		t.Fatalf("plain file token: %d", c)
	}
	writeFile(t, plain, "bbbb")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(plain, later, later); err != nil {
		t.Fatal(err)
	}
	if c := trigger("aaaa"); c != 401 {
		t.Errorf("old token after rewrite: %d, want 401", c)
	}
	if c := trigger("bbbb"); c != 202 {
		t.Errorf("new token after rewrite: %d, want 202", c)
	}

	// The secret disappears or is emptied: fail closed, even for the last
	// token that worked.
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
	if c := trigger("bbbb"); c != http.StatusInternalServerError {
		t.Errorf("token file removed: %d, want 500", c)
	}
	writeFile(t, plain, "\n")
	if c := trigger("bbbb"); c != http.StatusInternalServerError {
		t.Errorf("token file empty: %d, want 500", c)
	}
	writeFile(t, plain, "cccc")
	if c := trigger("cccc"); c != 202 {
		t.Errorf("token file restored: %d, want 202", c)
	}
	if n := e.triggerCount(SourceHTTP, resultError); n != 2 {
		t.Errorf("http error = %v, want 2", n)
	}
}

func TestNewChecksTokenFile(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.TokenFile = filepath.Join(dir, "missing")
	if _, err := New(cfg, Deps{Queue: newFakeQueue(), Tasks: testTasks}); err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Errorf("missing token file: err = %v", err)
	}
	cfg.TokenFile = filepath.Join(dir, "empty")
	writeFile(t, cfg.TokenFile, "  \n")
	if _, err := New(cfg, Deps{Queue: newFakeQueue(), Tasks: testTasks}); !errors.Is(err, errEmptyToken) {
		t.Errorf("empty token file: err = %v", err)
	}
	if _, err := New(DefaultConfig(), Deps{}); err == nil {
		t.Error("New without a Queue succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultConfig()
	c.Listen = "8080"
	c.AlertTableLabel = "1table"
	c.AlertNamespaceLabel = "" // off: allowed
	c.AlertTaskLabel = "task-name"
	c.MaxBodyBytes = 0
	c.ShutdownTimeout = 0
	before := c
	err := c.Validate()
	if c != before {
		t.Error("Validate changed the config")
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"listen:", "alertmanager.table_label:", "alertmanager.task_label:", "max_body_bytes:", "shutdown_timeout:"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s: %v", f, err)
		}
	}
	if strings.Contains(err.Error(), "namespace_label") {
		t.Errorf("empty namespace label reported: %v", err)
	}
	if _, nerr := New(c, Deps{Queue: newFakeQueue(), Tasks: testTasks}); nerr == nil {
		t.Error("New accepted an invalid config")
	}
}

func TestHealthzStatusMetrics(t *testing.T) {
	q := newFakeQueue("sales.orders")
	q.status = map[string]any{"queued": []map[string]string{{"table": "sales.orders"}}, "running": []string{}}
	e := newEnv(t, DefaultConfig(), q, nil)

	w := e.do(http.MethodGet, "/healthz", "")
	if w.Code != 200 || w.Body.String() != "ok\n" {
		t.Errorf("healthz: %d %q", w.Code, w.Body)
	}
	w = e.do(http.MethodGet, "/v1/status", "")
	if w.Code != 200 {
		t.Fatalf("status: %d", w.Code)
	}
	st := decode[map[string]any](t, w)
	if fmt.Sprint(st["queued"]) != "[map[table:sales.orders]]" {
		t.Errorf("status = %v", st)
	}
	if w := e.do(http.MethodGet, "/nope", ""); w.Code != 404 || !strings.Contains(decode[errorBody](t, w).Error, "/nope") {
		t.Errorf("unknown path: %d %s", w.Code, w.Body)
	}
	w = e.do(http.MethodGet, "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("metrics: %d", w.Code)
	}
	for _, s := range []string{
		`iceberg_maintainer_http_requests_total{code="200",handler="healthz"} 1`,
		`iceberg_maintainer_http_requests_total{code="404",handler="not_found"} 1`,
		`iceberg_maintainer_trigger_requests_total{result="queued",source="http"} 0`,
	} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
}

func TestReadyz(t *testing.T) {
	catalogDown := errors.New("dial tcp 10.0.0.1:8181: connection refused")
	ready := map[string]func(context.Context) error{
		"catalog": func(context.Context) error { return nil },
		"lock":    func(context.Context) error { return nil },
	}
	e := newEnv(t, DefaultConfig(), newFakeQueue(), ready)
	w := e.do(http.MethodGet, "/readyz", "")
	rep := decode[readyReport](t, w)
	if w.Code != 200 || rep.Status != "ok" || rep.Checks["catalog"] != "ok" || rep.Checks["lock"] != "ok" {
		t.Fatalf("all passing: %d %+v", w.Code, rep)
	}

	ready["catalog"] = func(context.Context) error { return catalogDown }
	ready["lock"] = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() } // hangs
	ready["s3"] = func(context.Context) error { return nil }
	e = newEnv(t, DefaultConfig(), newFakeQueue(), ready)
	e.srv.readyTimeout = 50 * time.Millisecond
	w = e.do(http.MethodGet, "/readyz", "")
	rep = decode[readyReport](t, w)
	if w.Code != http.StatusServiceUnavailable || rep.Status != "unavailable" {
		t.Fatalf("failing: %d %+v", w.Code, rep)
	}
	if rep.Checks["catalog"] != catalogDown.Error() {
		t.Errorf("catalog check = %q", rep.Checks["catalog"])
	}
	if !strings.Contains(rep.Checks["lock"], "timed out") {
		t.Errorf("lock check = %q, want a timeout", rep.Checks["lock"])
	}
	if rep.Checks["s3"] != "ok" {
		t.Errorf("s3 check = %q", rep.Checks["s3"])
	}
	if rep.Error != "failing checks: catalog, lock" {
		t.Errorf("error = %q", rep.Error)
	}

	// A check that ignores its context does not hold the probe.
	release := make(chan struct{})
	defer close(release)
	e = newEnv(t, DefaultConfig(), newFakeQueue(), map[string]func(context.Context) error{
		"stuck": func(context.Context) error { <-release; return nil },
	})
	e.srv.readyTimeout = 10 * time.Millisecond
	if w := e.do(http.MethodGet, "/readyz", ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "timed out") {
		t.Errorf("stuck check: %d %s", w.Code, w.Body)
	}
}

func TestRun(t *testing.T) {
	q := newFakeQueue("sales.orders")
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	e := newEnv(t, cfg, q, map[string]func(context.Context) error{"catalog": func(context.Context) error { return nil }})
	if e.srv.Addr() != "" {
		t.Errorf("Addr before Run = %q", e.srv.Addr())
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	select {
	case <-e.srv.Listening():
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	}
	addr := e.srv.Addr()
	base := "http://" + addr

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz over TCP: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/trigger", "application/json", strings.NewReader(`{"table":"sales.orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 || len(q.requests()) != 1 {
		t.Errorf("trigger over TCP: %d, %d enqueued", resp.StatusCode, len(q.requests()))
	}
	if err := e.srv.Run(ctx); err == nil {
		t.Error("second Run succeeded")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("port %s still accepts connections", addr)
	}
	// After shutdown began, readiness and triggers answer 503.
	if w := e.do(http.MethodGet, "/readyz", ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "shutting down") {
		t.Errorf("readyz after shutdown: %d %s", w.Code, w.Body)
	}
	w := e.do(http.MethodPost, "/v1/trigger", `{"table":"sales.orders"}`)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("trigger after shutdown: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if len(q.requests()) != 1 {
		t.Errorf("enqueued after shutdown: %+v", q.requests())
	}
}

// TestRunDrainsInFlight: a trigger being served when shutdown starts still
// gets its answer, and Run still returns nil.
func TestRunDrainsInFlight(t *testing.T) {
	q := newFakeQueue("sales.orders")
	q.block = make(chan struct{})
	q.entered = make(chan struct{}, 1)
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	e := newEnv(t, cfg, q, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	<-e.srv.Listening()

	code := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+e.srv.Addr()+"/v1/trigger", "application/json", strings.NewReader(`{"table":"sales.orders"}`))
		if err != nil {
			code <- -1
			return
		}
		resp.Body.Close()
		code <- resp.StatusCode
	}()
	<-q.entered // the request is inside the handler
	cancel()
	waitFor(t, func() bool { return e.srv.stopping.Load() })
	close(q.block)
	if c := <-code; c != http.StatusAccepted {
		t.Errorf("in-flight trigger: %d, want 202", c)
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if len(q.requests()) != 1 {
		t.Errorf("enqueued %+v", q.requests())
	}
}

// TestRunShutdownTimeout: a request that never finishes makes Run give up
// after ShutdownTimeout and say so.
func TestRunShutdownTimeout(t *testing.T) {
	q := newFakeQueue("sales.orders")
	q.block = make(chan struct{})
	q.entered = make(chan struct{}, 1)
	defer close(q.block)
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownTimeout = 50 * time.Millisecond
	e := newEnv(t, cfg, q, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	<-e.srv.Listening()
	go func() {
		resp, err := http.Post("http://"+e.srv.Addr()+"/v1/trigger", "application/json", strings.NewReader(`{"table":"sales.orders"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-q.entered
	cancel()
	err := <-done
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "shut down") {
		t.Errorf("Run = %v, want a shutdown deadline error", err)
	}
}

func TestRunListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := DefaultConfig()
	cfg.Listen = ln.Addr().String()
	e := newEnv(t, cfg, newFakeQueue(), nil)
	if err := e.srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("Run on a used port = %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A request whose every task waits for its rate limit is counted held, not
// queued: nothing entered the queue.
func TestHeldRequestCountsHeld(t *testing.T) {
	q := newFakeQueue("web.events")
	q.state = StateHeld
	e := newEnv(t, DefaultConfig(), q, nil)
	if w := e.do(http.MethodPost, "/v1/trigger", `{"table":"web.events"}`, "Content-Type", "application/json"); w.Code != http.StatusAccepted {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	if held, queued := e.triggerCount(SourceHTTP, resultHeld), e.triggerCount(SourceHTTP, resultQueued); held != 1 || queued != 0 {
		t.Errorf("held %v, queued %v; want 1 and 0", held, queued)
	}
}
