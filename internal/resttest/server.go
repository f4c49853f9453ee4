// Package resttest is an Iceberg REST catalog server for tests: an httptest
// server implementing the endpoints of the Iceberg REST OpenAPI spec that
// iceberg-go's REST client uses to maintain tables (config, the OAuth2 token
// endpoint, namespaces, tables, load, commit), backed by an iceberg-go SQL
// catalog. The SQL catalog applies the updates and writes the metadata; the
// server translates, checks every commit requirement of the spec itself
// against the current metadata, answers 409 CommitFailedException when one
// fails and 404s with the spec's ErrorModel, and requires a bearer token on
// every route but the token endpoint.
//
// Every request and response body is checked against the spec's schemas
// (spec.go); a violation fails the test (Config.OnViolation).
package resttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Endpoints served, in the spec's "<verb> <path>" form (the form of
// CatalogConfig.endpoints and of Server.Requests).
const (
	EndpointConfig          = "GET /v1/config"
	EndpointToken           = "POST /v1/oauth/tokens"
	EndpointListNamespaces  = "GET /v1/{prefix}/namespaces"
	EndpointLoadNamespace   = "GET /v1/{prefix}/namespaces/{namespace}"
	EndpointNamespaceExists = "HEAD /v1/{prefix}/namespaces/{namespace}"
	EndpointListTables      = "GET /v1/{prefix}/namespaces/{namespace}/tables"
	EndpointLoadTable       = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"
	EndpointTableExists     = "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}"
	EndpointCommitTable     = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}"
)

// catalogEndpoints are advertised in CatalogConfig.endpoints.
var catalogEndpoints = []string{
	EndpointListNamespaces, EndpointLoadNamespace, EndpointNamespaceExists,
	EndpointListTables, EndpointLoadTable, EndpointTableExists, EndpointCommitTable,
}

// Catalog is what the server needs of the SQL catalog behind it.
type Catalog interface {
	ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error)
	CheckNamespaceExists(ctx context.Context, namespace table.Identifier) (bool, error)
	ListTables(ctx context.Context, namespace table.Identifier) iter.Seq2[table.Identifier, error]
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
	CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
}

// Config says how the server behaves.
type Config struct {
	// Credential is the "client_id:client_secret" the token endpoint
	// accepts (client_credentials grant); empty accepts none.
	Credential string
	// Tokens are bearer tokens accepted besides those the token endpoint
	// issued (a static token, the client's "token" property).
	Tokens []string
	// Prefix, when set, is handed to clients in the config's overrides
	// ("prefix") and every catalog route is served under /v1/{Prefix}/.
	Prefix string
	// Overrides are more config overrides for clients.
	Overrides map[string]string
	// TableConfig is the "config" of every LoadTable answer (the table's
	// IO properties, s3.endpoint and the like).
	TableConfig map[string]string
	// BeforeCommit, when set, runs before each commit's requirements are
	// checked: a test commits there as a concurrent writer would (through
	// the backing catalog, not this server), or returns a *Reply to answer
	// the commit with instead of committing.
	BeforeCommit func(ctx context.Context, c Commit) error
	// OnViolation is told of every request or response that breaks the
	// spec; by default it fails the test.
	OnViolation func(msg string)
}

// Commit is one commit request, decoded.
type Commit struct {
	Ident        table.Identifier
	Requirements []table.Requirement
	Updates      []table.Update
	// Seq counts the commits to this server, from 1.
	Seq int
}

// Has reports whether the commit carries an update with this action
// ("add-snapshot", "remove-snapshots", ...).
func (c Commit) Has(action string) bool {
	return slices.ContainsFunc(c.Updates, func(u table.Update) bool { return u.Action() == action })
}

// Reply is an error answer a BeforeCommit hook asks for (a fault test).
type Reply struct {
	Code    int
	Type    string
	Message string
}

func (r *Reply) Error() string { return fmt.Sprintf("%d %s: %s", r.Code, r.Type, r.Message) }

// Server is a running REST catalog.
type Server struct {
	URL string

	cfg  Config
	cat  Catalog
	http *httptest.Server

	mu         sync.Mutex
	issued     map[string]bool // tokens the token endpoint handed out
	requests   map[string]int  // by endpoint
	violations []string
	commits    int
	// commitMu makes a commit's requirement check and its commit one step,
	// as a real catalog's compare-and-swap does.
	commitMu sync.Mutex
}

// Start serves cat until the test ends.
func Start(t testing.TB, cat Catalog, cfg Config) *Server {
	t.Helper()
	if cfg.OnViolation == nil {
		cfg.OnViolation = func(msg string) { t.Errorf("REST spec violation: %s", msg) }
	}
	s := &Server{cfg: cfg, cat: cat, issued: map[string]bool{}, requests: map[string]int{}}
	s.http = httptest.NewServer(s.routes())
	s.URL = s.http.URL
	t.Cleanup(s.http.Close)
	return s
}

// Requests returns how many requests an endpoint (Endpoint*) received.
func (s *Server) Requests(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[endpoint]
}

// Violations returns every spec violation seen so far.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.violations)
}

func (s *Server) violation(endpoint, format string, args ...any) {
	msg := endpoint + ": " + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.violations = append(s.violations, msg)
	s.mu.Unlock()
	s.cfg.OnViolation(msg)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	base := "/v1"
	if s.cfg.Prefix != "" {
		base += "/" + s.cfg.Prefix
	}
	handle := func(endpoint string, auth bool, h func(w http.ResponseWriter, r *http.Request, endpoint string)) {
		verb, path, _ := strings.Cut(endpoint, " ")
		pattern := verb + " " + strings.Replace(path, "/v1/{prefix}", base, 1)
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.requests[endpoint]++
			s.mu.Unlock()
			if auth && !s.authorized(r) {
				s.fail(w, endpoint, http.StatusUnauthorized, "NotAuthorizedException",
					"missing or unknown bearer token (Authorization: Bearer <token>)")
				return
			}
			h(w, r, endpoint)
		})
	}
	handle(EndpointConfig, true, s.getConfig)
	handle(EndpointToken, false, s.token)
	handle(EndpointListNamespaces, true, s.listNamespaces)
	handle(EndpointLoadNamespace, true, s.loadNamespace)
	handle(EndpointNamespaceExists, true, s.loadNamespace)
	handle(EndpointListTables, true, s.listTables)
	handle(EndpointLoadTable, true, s.loadTable)
	handle(EndpointTableExists, true, s.loadTable)
	handle(EndpointCommitTable, true, s.commitTable)
	// Anything else is a route the client should not have used: the
	// server did not advertise it.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		endpoint := r.Method + " " + r.URL.Path
		s.violation(endpoint, "not an endpoint this server advertises")
		s.fail(w, endpoint, http.StatusNotFound, "NoSuchEndpointException", "no such endpoint: "+endpoint)
	})
	return mux
}

func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued[tok] || slices.Contains(s.cfg.Tokens, tok)
}

// reply writes body as JSON after checking it against its schema.
func (s *Server) reply(w http.ResponseWriter, endpoint string, code int, body any, schema func(*checker, string, any)) {
	b, err := json.Marshal(body)
	if err != nil {
		s.violation(endpoint, "encode the response: %v", err)
		code, b = http.StatusInternalServerError, nil
	} else if problems := check(b, schema); len(problems) > 0 {
		s.violation(endpoint, "response %d breaks the spec: %s", code, strings.Join(problems, "; "))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// fail answers with the spec's IcebergErrorResponse.
func (s *Server) fail(w http.ResponseWriter, endpoint string, code int, typ, msg string) {
	body := map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
	s.reply(w, endpoint, code, body, (*checker).errorResponse)
}

// check decodes b and runs schema on it; it returns the problems found.
func check(b []byte, schema func(*checker, string, any)) []string {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	c := &checker{}
	schema(c, "$", v)
	return c.problems
}

func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request, endpoint string) {
	overrides := map[string]string{}
	for k, v := range s.cfg.Overrides {
		overrides[k] = v
	}
	if s.cfg.Prefix != "" {
		overrides["prefix"] = s.cfg.Prefix
	}
	s.reply(w, endpoint, http.StatusOK, map[string]any{
		"defaults": map[string]string{}, "overrides": overrides, "endpoints": catalogEndpoints,
	}, (*checker).catalogConfig)
}

// token is the OAuth2 token endpoint, client_credentials grant only
// (OAuthClientCredentialsRequest): id and secret in the form or in a Basic
// Authorization header.
func (s *Server) token(w http.ResponseWriter, r *http.Request, endpoint string) {
	oauthFail := func(code int, kind, desc string) {
		s.reply(w, endpoint, code, map[string]string{"error": kind, "error_description": desc}, (*checker).oauthError)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		s.violation(endpoint, "request Content-Type %q, want application/x-www-form-urlencoded", ct)
		oauthFail(http.StatusBadRequest, "invalid_request", "want a form body")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthFail(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "client_credentials" {
		oauthFail(http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q", g))
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		if !r.PostForm.Has("client_id") || !r.PostForm.Has("client_secret") {
			s.violation(endpoint, "client_credentials request without client_id and client_secret")
			oauthFail(http.StatusBadRequest, "invalid_request", "client_id and client_secret are required")
			return
		}
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if s.cfg.Credential == "" || id+":"+secret != s.cfg.Credential {
		oauthFail(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.issued[tok] = true
	s.mu.Unlock()
	body := map[string]any{
		"access_token": tok, "token_type": "bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	}
	if sc := r.PostForm.Get("scope"); sc != "" {
		body["scope"] = sc
	}
	s.reply(w, endpoint, http.StatusOK, body, (*checker).oauthTokenResponse)
}

// namespaceParam decodes the {namespace} path parameter: levels joined by
// the unit separator 0x1F (the default namespace-separator).
func namespaceParam(r *http.Request) table.Identifier {
	return strings.Split(r.PathValue("namespace"), "\x1f")
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request, endpoint string) {
	var parent table.Identifier
	if p := r.URL.Query().Get("parent"); p != "" {
		parent = strings.Split(p, "\x1f")
		if !s.namespaceExists(w, r, endpoint, parent) {
			return
		}
	}
	nss, err := s.cat.ListNamespaces(r.Context(), parent)
	if err != nil {
		s.internal(w, endpoint, err)
		return
	}
	if nss == nil {
		nss = []table.Identifier{}
	}
	s.reply(w, endpoint, http.StatusOK, map[string]any{"namespaces": nss}, (*checker).listNamespacesResponse)
}

// namespaceExists answers 404 NoSuchNamespaceException and returns false
// when ns does not exist.
func (s *Server) namespaceExists(w http.ResponseWriter, r *http.Request, endpoint string, ns table.Identifier) bool {
	ok, err := s.cat.CheckNamespaceExists(r.Context(), ns)
	switch {
	case err != nil:
		s.internal(w, endpoint, err)
		return false
	case !ok:
		s.fail(w, endpoint, http.StatusNotFound, "NoSuchNamespaceException",
			fmt.Sprintf("Namespace does not exist: %s", strings.Join(ns, ".")))
		return false
	}
	return true
}

func (s *Server) loadNamespace(w http.ResponseWriter, r *http.Request, endpoint string) {
	ns := namespaceParam(r)
	if !s.namespaceExists(w, r, endpoint, ns) {
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.reply(w, endpoint, http.StatusOK, map[string]any{"namespace": ns, "properties": map[string]string{}},
		(*checker).getNamespaceResponse)
}

func (s *Server) listTables(w http.ResponseWriter, r *http.Request, endpoint string) {
	ns := namespaceParam(r)
	if !s.namespaceExists(w, r, endpoint, ns) {
		return
	}
	type identifier struct {
		Namespace []string `json:"namespace"`
		Name      string   `json:"name"`
	}
	ids := []identifier{}
	for ident, err := range s.cat.ListTables(r.Context(), ns) {
		if err != nil {
			s.internal(w, endpoint, err)
			return
		}
		ids = append(ids, identifier{Namespace: ident[:len(ident)-1], Name: ident[len(ident)-1]})
	}
	s.reply(w, endpoint, http.StatusOK, map[string]any{"identifiers": ids}, (*checker).listTablesResponse)
}

// tableIdent is the table of the request's path.
func tableIdent(r *http.Request) table.Identifier {
	return append(namespaceParam(r), r.PathValue("table"))
}

// load loads the table, answering the spec's 404s when it or its
// namespace does not exist (nil then).
func (s *Server) load(w http.ResponseWriter, r *http.Request, endpoint string, ident table.Identifier) *table.Table {
	tbl, err := s.cat.LoadTable(r.Context(), ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		if s.namespaceExists(w, r, endpoint, ident[:len(ident)-1]) {
			s.fail(w, endpoint, http.StatusNotFound, "NoSuchTableException",
				fmt.Sprintf("Table does not exist: %s", strings.Join(ident, ".")))
		}
		return nil
	}
	if err != nil {
		s.internal(w, endpoint, err)
		return nil
	}
	return tbl
}

func (s *Server) loadTable(w http.ResponseWriter, r *http.Request, endpoint string) {
	if m := r.URL.Query().Get("snapshots"); m != "" && m != "all" && m != "refs" {
		s.violation(endpoint, "query snapshots=%q, want all or refs", m)
		s.fail(w, endpoint, http.StatusBadRequest, "BadRequestException", "snapshots must be all or refs")
		return
	}
	tbl := s.load(w, r, endpoint, tableIdent(r))
	if tbl == nil {
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	tableConfig := s.cfg.TableConfig
	if tableConfig == nil {
		tableConfig = map[string]string{}
	}
	// Every snapshot is returned, also for snapshots=refs: the spec lets a
	// server send more than the referenced ones.
	s.reply(w, endpoint, http.StatusOK, map[string]any{
		"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": tableConfig,
	}, (*checker).loadTableResult)
}

// internal answers an unexpected backing-catalog error with 500.
func (s *Server) internal(w http.ResponseWriter, endpoint string, err error) {
	s.fail(w, endpoint, http.StatusInternalServerError, "InternalServerError", err.Error())
}
