package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyCheckTimeout bounds each readiness check, so a hung catalog cannot
// make the kubelet's probe time out instead of getting a clear 503.
const readyCheckTimeout = 2 * time.Second

// Deps are the server's collaborators.
type Deps struct {
	Queue Queue // required
	// Tasks are the task names a request may ask for, in the order the
	// queue runs them (required). Requests are checked against them and
	// reported in this order, so that merged requests compare equal
	// whatever order the caller used.
	Tasks []string
	// Ready are the readiness checks by name (e.g. "catalog", "lock"); /readyz
	// runs them in parallel, each with a 2s timeout.
	Ready map[string]func(ctx context.Context) error
	// Gatherer is what /metrics serves; nil = the Registerer if it is also a
	// Gatherer, else no /metrics endpoint.
	Gatherer prometheus.Gatherer
	// Registerer takes the server's own metrics; nil = a private registry
	// (never the default one).
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil = discard
}

// Server serves the HTTP API. Create it with New; serve it with Run, or mount
// Handler in a server of your own.
type Server struct {
	cfg          Config
	queue        Queue
	tasks        []string // in run order
	ready        map[string]func(ctx context.Context) error
	readyTimeout time.Duration
	log          *slog.Logger
	m            *serverMetrics
	token        *tokenSource // nil = no auth
	handler      http.Handler

	// stopping is set when Run's context ends: /readyz turns 503 so load
	// balancers drain us, and triggers are refused with 503 so senders retry
	// elsewhere instead of losing work to a queue that is going away.
	stopping atomic.Bool

	runOnce   atomic.Bool
	addr      atomic.Pointer[string]
	listening chan struct{}
}

// New checks cfg, reads the token file (a missing or empty secret fails here,
// before serving) and builds the routes.
func New(cfg Config, d Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if d.Queue == nil {
		return nil, errors.New("server: Deps.Queue is required")
	}
	if len(d.Tasks) == 0 {
		return nil, errors.New("server: Deps.Tasks is required")
	}
	s := &Server{
		cfg:          cfg,
		queue:        d.Queue,
		tasks:        slices.Clone(d.Tasks),
		ready:        maps.Clone(d.Ready), // the caller may keep editing its map
		readyTimeout: readyCheckTimeout,
		log:          d.Logger,
		listening:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	reg := d.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.m = newServerMetrics(reg)
	if cfg.TokenFile != "" {
		t, err := newTokenSource(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("server token_file: %w", err)
		}
		s.token = t
	}
	gatherer := d.Gatherer
	if gatherer == nil {
		gatherer, _ = d.Registerer.(prometheus.Gatherer)
	}

	mux := http.NewServeMux()
	route := func(path, name string, h http.HandlerFunc) {
		mux.Handle(path, s.m.instrument(name, h))
	}
	// Methods are checked in the handlers rather than in mux patterns so
	// that a 405 gets a JSON body and is counted as a rejected trigger.
	route("/v1/trigger", "trigger", s.handleTrigger)
	route("/v1/alertmanager", "alertmanager", s.handleAlertmanager)
	route("/v1/status", "status", s.handleStatus)
	route("/healthz", "healthz", s.handleHealthz)
	route("/readyz", "readyz", s.handleReadyz)
	if gatherer != nil {
		mux.Handle("/metrics", s.m.instrument("metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError),
		})))
	}
	route("/", "not_found", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	})
	s.handler = mux
	return s, nil
}

// Handler returns the routes, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr is the address Run bound, e.g. "[::]:41234" for Listen ":0"; empty
// until Listening is closed.
func (s *Server) Addr() string {
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Listening is closed once Run has bound its address.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Run listens on cfg.Listen and serves until ctx is done, then stops taking
// work (readiness and triggers answer 503) and shuts down gracefully within
// ShutdownTimeout. It returns nil on a clean shutdown. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.runOnce.CompareAndSwap(false, true) {
		return errors.New("server: Run called twice")
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	close(s.listening)

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if s.token == nil {
		s.log.Warn("no server.token_file configured: trigger, alertmanager and status endpoints accept unauthenticated requests")
	}
	s.log.Info("HTTP server listening", "addr", addr)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		s.stopping.Store(true)
		return fmt.Errorf("serve HTTP on %s: %w", addr, err)
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	s.log.Info("HTTP server shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served // Serve returns ErrServerClosed as soon as Shutdown starts
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down HTTP server within %s: %w", s.cfg.ShutdownTimeout, err)
	}
	return nil
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// readyReport is the body of /readyz.
type readyReport struct {
	Status string            `json:"status"` // "ok" or "unavailable"
	Checks map[string]string `json:"checks"` // name -> "ok" or the error
	Error  string            `json:"error,omitempty"`
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	if s.stopping.Load() {
		writeJSON(w, http.StatusServiceUnavailable, readyReport{Status: "unavailable", Checks: map[string]string{}, Error: ErrStopping.Error()})
		return
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(s.ready))
	for name, check := range s.ready {
		go func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.readyTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- check(ctx) }()
			select {
			case err := <-done:
				results <- result{name, err}
			case <-ctx.Done():
				// A check that ignores ctx must not hold the probe.
				results <- result{name, fmt.Errorf("timed out after %s: %w", s.readyTimeout, ctx.Err())}
			}
		}()
	}
	rep := readyReport{Status: "ok", Checks: make(map[string]string, len(s.ready))}
	var failed []string
	for range s.ready {
		res := <-results
		if res.err != nil {
			rep.Checks[res.name] = res.err.Error()
			failed = append(failed, res.name)
		} else {
			rep.Checks[res.name] = "ok"
		}
	}
	if len(failed) == 0 {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	sort.Strings(failed)
	rep.Status = "unavailable"
	rep.Error = "failing checks: " + strings.Join(failed, ", ")
	s.log.Warn("not ready", "checks", failed)
	writeJSON(w, http.StatusServiceUnavailable, rep)
}

// handleStatus requires the token too when one is configured: the document
// names every managed table and what is queued or failing on it.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	if ok, _ := s.authorize(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.queue.Status())
}

// allowMethods answers 405 with an Allow header unless r uses one of methods.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, strings.Join(methods, " or ")))
	return false
}

// errorBody is every error answer: {"error": "..."} plus optional details.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// decodeBody reads one JSON value of at most MaxBodyBytes into dst. On failure
// it returns the status (400 or 413) and a message that says what is wrong
// and where, without echoing the body.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, strict bool) (int, string) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, s.cfg.MaxBodyBytes)
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(dst)
	if err == nil {
		// Exactly one value: trailing data usually means two requests glued
		// together, and guessing which one was meant is worse than refusing.
		var extra json.RawMessage
		switch err2 := dec.Decode(&extra); {
		case errors.Is(err2, io.EOF):
			return 0, ""
		case err2 == nil:
			return http.StatusBadRequest, fmt.Sprintf("unexpected data after the JSON value, at byte %d", dec.InputOffset()-int64(len(extra))+1)
		default:
			err = err2
		}
	}
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes", maxErr.Limit)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, "request body is empty; expected a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "malformed JSON: body ends in the middle of a value"
	case errors.As(err, &syntaxErr):
		// Offset counts the bytes read including the offending one, so it
		// is that byte's 1-based position.
		return http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %s", syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(top level)"
		}
		return http.StatusBadRequest, fmt.Sprintf("field %s near byte %d: JSON %s cannot be a %s", field, typeErr.Offset, typeErr.Value, typeErr.Type)
	default:
		// e.g. `json: unknown field "x"`
		return http.StatusBadRequest, "invalid request: " + strings.TrimPrefix(err.Error(), "json: ")
	}
}

// normalizeTasks checks task names and returns them de-duplicated in run
// order; nil means all tasks.
func (s *Server) normalizeTasks(tasks []string) ([]string, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	want := make(map[string]bool, len(tasks))
	var bad []string
	for _, t := range tasks {
		if !slices.Contains(s.tasks, t) {
			bad = append(bad, fmt.Sprintf("%q", t))
			continue
		}
		want[t] = true
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w %s: must be one of %s", ErrUnknownTask, strings.Join(bad, ", "), strings.Join(s.tasks, ", "))
	}
	out := make([]string, 0, len(want))
	for _, t := range s.tasks {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// enqueueMessage is the client's error text for a failed Enqueue; it names
// the table unless the queue's error already does.
func enqueueMessage(table string, err error) string {
	if strings.Contains(err.Error(), table) {
		return err.Error()
	}
	return fmt.Sprintf("table %q: %v", table, err)
}

// enqueueStatus maps a Queue error to an HTTP status and a trigger result.
func enqueueStatus(err error) (int, string) {
	switch {
	case errors.Is(err, ErrUnknownTable), errors.Is(err, ErrUnknownTask), errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, resultRejected
	case errors.Is(err, ErrStopping), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, resultError
	default:
		return http.StatusInternalServerError, resultError
	}
}
