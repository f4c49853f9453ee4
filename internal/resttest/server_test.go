package resttest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

const credential = "maintainer:s3cret"

// backing creates a SQLite catalog with one small generated table, demo.events.
func backing(t *testing.T) *sqlcat.Catalog {
	t.Helper()
	dir := t.TempDir()
	cat, err := gen.OpenSQLiteCatalog(t.Context(), "backing", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	if _, err := gen.Create(t.Context(), cat, gen.Options{Namespace: "demo", Table: "events", Appends: 3, RowsPerAppend: 10, Partitions: 1, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return cat
}

// client opens iceberg-go's REST client on srv with props.
func client(t *testing.T, srv *Server, props map[string]string) (*rest.Catalog, error) {
	t.Helper()
	p := iceberg.Properties{"type": "rest", "uri": srv.URL}
	for k, v := range props {
		p[k] = v
	}
	cat, err := catalog.Load(t.Context(), "rest", p)
	if err != nil {
		return nil, err
	}
	return cat.(*rest.Catalog), nil
}

var events = table.Identifier{"demo", "events"}

// withToken serves a fresh backing catalog with cfg plus the bearer token
// "tok", and opens a client with that token.
func withToken(t *testing.T, cfg Config) (*sqlcat.Catalog, *Server, *rest.Catalog) {
	t.Helper()
	back := backing(t)
	cfg.Tokens = append(cfg.Tokens, "tok")
	srv := Start(t, back, cfg)
	cat, err := client(t, srv, map[string]string{"token": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return back, srv, cat
}

// Everything the maintainer does through the REST client works: OAuth2
// client credentials, listing, loading and committing, with no spec
// violation either way.
func TestRESTClientRoundTrip(t *testing.T) {
	back := backing(t)
	for _, prefix := range []string{"", "warehouse-1"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			srv := Start(t, back, Config{Credential: credential, Prefix: prefix})
			cat, err := client(t, srv, map[string]string{"credential": credential})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			nss, err := cat.ListNamespaces(ctx, nil)
			if err != nil || len(nss) != 1 || nss[0][0] != "demo" {
				t.Fatalf("ListNamespaces: %v, %v", nss, err)
			}
			if ok, err := cat.CheckNamespaceExists(ctx, table.Identifier{"demo"}); !ok || err != nil {
				t.Errorf("CheckNamespaceExists(demo): %v, %v", ok, err)
			}
			var tables []table.Identifier
			for id, err := range cat.ListTables(ctx, table.Identifier{"demo"}) {
				if err != nil {
					t.Fatal(err)
				}
				tables = append(tables, id)
			}
			if len(tables) != 1 || strings.Join(tables[0], ".") != "demo.events" {
				t.Fatalf("ListTables: %v", tables)
			}
			if ok, err := cat.CheckTableExists(ctx, events); !ok || err != nil {
				t.Errorf("CheckTableExists: %v, %v", ok, err)
			}
			tbl, err := cat.LoadTable(ctx, events)
			if err != nil {
				t.Fatal(err)
			}
			if len(tbl.Metadata().Snapshots()) != 3 {
				t.Errorf("loaded %d snapshots, want 3", len(tbl.Metadata().Snapshots()))
			}
			tx := tbl.NewTransaction()
			if err := tx.SetProperties(iceberg.Properties{"owner": "rest-" + prefix}); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit through REST: %v", err)
			}
			direct, err := back.LoadTable(ctx, events)
			if err != nil {
				t.Fatal(err)
			}
			if got := direct.Properties()["owner"]; got != "rest-"+prefix {
				t.Errorf("backing catalog has owner=%q after the REST commit", got)
			}
			for _, e := range []string{EndpointToken, EndpointConfig, EndpointListNamespaces, EndpointListTables,
				EndpointLoadTable, EndpointTableExists, EndpointCommitTable} {
				if srv.Requests(e) == 0 {
					t.Errorf("no request to %s", e)
				}
			}
		})
	}
}

// Every route but the token endpoint wants a bearer token: none, a wrong
// one and a wrong client secret are refused with 401; a static token works.
func TestBearerAuth(t *testing.T) {
	back := backing(t)
	srv := Start(t, back, Config{Credential: credential, Tokens: []string{"static-token"}})
	if _, err := client(t, srv, nil); !errors.Is(err, rest.ErrUnauthorized) {
		t.Errorf("no token: %v, want ErrUnauthorized", err)
	}
	if _, err := client(t, srv, map[string]string{"token": "wrong"}); !errors.Is(err, rest.ErrUnauthorized) {
		t.Errorf("wrong token: %v, want ErrUnauthorized", err)
	}
	if _, err := client(t, srv, map[string]string{"credential": "maintainer:wrong"}); !errors.Is(err, rest.ErrOAuthError) ||
		!strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("wrong secret: %v, want an invalid_client OAuth error", err)
	}
	cat, err := client(t, srv, map[string]string{"token": "static-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.LoadTable(t.Context(), events); err != nil {
		t.Errorf("load with the static token: %v", err)
	}
	code, body := raw(t, srv, "GET", "/v1/namespaces/demo/tables/events", "", "")
	if code != http.StatusUnauthorized || errType(t, body) != "NotAuthorizedException" {
		t.Errorf("load without a token: %d %s", code, body)
	}
}

// raw sends one request with the bearer token tok ("" for none).
func raw(t *testing.T, srv *Server, method, path, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func errType(t *testing.T, body string) string { return errorModel(t, body).Type }

func errMessage(t *testing.T, body string) string { return errorModel(t, body).Message }

type errModel struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func errorModel(t *testing.T, body string) errModel {
	t.Helper()
	var e struct {
		Error errModel `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error
}

// Missing tables and namespaces are the spec's 404s, with their exception
// types, and reach the client as iceberg-go's sentinels.
func TestNotFound(t *testing.T) {
	_, srv, cat := withToken(t, Config{})
	ctx := t.Context()
	if _, err := cat.LoadTable(ctx, table.Identifier{"demo", "nope"}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("load a missing table: %v", err)
	}
	if ok, err := cat.CheckTableExists(ctx, table.Identifier{"demo", "nope"}); ok || err != nil {
		t.Errorf("CheckTableExists(missing): %v, %v", ok, err)
	}
	for _, err := range cat.ListTables(ctx, table.Identifier{"nons"}) {
		if !errors.Is(err, catalog.ErrNoSuchNamespace) {
			t.Errorf("list tables of a missing namespace: %v", err)
		}
	}
	if _, _, err := cat.CommitTable(ctx, table.Identifier{"demo", "nope"}, []table.Requirement{}, []table.Update{}); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("commit to a missing table: %v", err)
	}
	for path, want := range map[string]string{
		"/v1/namespaces/demo/tables/nope": "NoSuchTableException",
		"/v1/namespaces/nons/tables/nope": "NoSuchNamespaceException",
		"/v1/namespaces/nons/tables":      "NoSuchNamespaceException",
		"/v1/namespaces/nons":             "NoSuchNamespaceException",
	} {
		if code, body := raw(t, srv, "GET", path, "tok", ""); code != http.StatusNotFound || errType(t, body) != want {
			t.Errorf("GET %s: %d %s; want 404 %s", path, code, body, want)
		}
	}
}

// Each requirement type of the spec is checked against the current
// metadata: the true one lets the commit through, the false one fails it
// with 409 CommitFailedException (table.ErrCommitFailed in the client).
func TestRequirements(t *testing.T) {
	back, _, cat := withToken(t, Config{})
	ctx := t.Context()
	tbl, err := cat.LoadTable(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	m := tbl.Metadata()
	main := m.CurrentSnapshot().SnapshotID
	parent := *m.CurrentSnapshot().ParentSnapshotID
	lastPart := *m.LastPartitionSpecID()
	cases := []struct {
		name       string
		holds, not table.Requirement
	}{
		{"assert-create", nil, table.AssertCreate()},
		{"assert-table-uuid", table.AssertTableUUID(m.TableUUID()), table.AssertTableUUID([16]byte{1})},
		{"assert-ref-snapshot-id", table.AssertRefSnapshotID("main", &main), table.AssertRefSnapshotID("main", &parent)},
		{"assert-ref-snapshot-id missing ref", table.AssertRefSnapshotID("nosuch", nil), table.AssertRefSnapshotID("nosuch", &main)},
		{"assert-ref-snapshot-id ref exists", nil, table.AssertRefSnapshotID("main", nil)},
		{"assert-last-assigned-field-id", table.AssertLastAssignedFieldID(m.LastColumnID()), table.AssertLastAssignedFieldID(m.LastColumnID() + 1)},
		{"assert-current-schema-id", table.AssertCurrentSchemaID(m.CurrentSchema().ID), table.AssertCurrentSchemaID(m.CurrentSchema().ID + 1)},
		{"assert-last-assigned-partition-id", table.AssertLastAssignedPartitionID(lastPart), table.AssertLastAssignedPartitionID(lastPart + 1)},
		{"assert-default-spec-id", table.AssertDefaultSpecID(m.DefaultPartitionSpec()), table.AssertDefaultSpecID(m.DefaultPartitionSpec() + 1)},
		{"assert-default-sort-order-id", table.AssertDefaultSortOrderID(m.DefaultSortOrder()), table.AssertDefaultSortOrderID(m.DefaultSortOrder() + 1)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := func(v string) []table.Update {
				return []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"case": v})}
			}
			if c.holds != nil {
				if _, _, err := cat.CommitTable(ctx, events, []table.Requirement{c.holds}, set(c.name)); err != nil {
					t.Errorf("commit with a requirement that holds: %v", err)
				}
			}
			_, _, err := cat.CommitTable(ctx, events, []table.Requirement{c.not}, set("never"))
			if !errors.Is(err, table.ErrCommitFailed) || !strings.Contains(err.Error(), "CommitFailedException") {
				t.Errorf("commit with a requirement that fails: %v; want 409 CommitFailedException", err)
			}
			direct, err := back.LoadTable(ctx, events)
			if err != nil {
				t.Fatal(err)
			}
			if got := direct.Properties()["case"]; got == "never" || c.holds != nil && got != c.name {
				t.Errorf("case %d: property case=%q after the commits", i, got)
			}
		})
	}
}

// A request that breaks the spec (an unknown requirement type, an update
// without its required field) is refused with 400 and reported.
func TestBadCommitRequest(t *testing.T) {
	back := backing(t)
	var mu sync.Mutex
	var seen []string
	srv := Start(t, back, Config{Tokens: []string{"tok"}, OnViolation: func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, msg)
	}})
	for body, want := range map[string]string{
		`{"requirements":[{"type":"assert-bogus"}],"updates":[]}`:                                                     "unknown requirement type",
		`{"requirements":[{"type":"assert-ref-snapshot-id","ref":"main"}],"updates":[]}`:                              `requires field "snapshot-id"`,
		`{"requirements":[],"updates":[{"action":"remove-snapshots"}]}`:                                               `"snapshot-ids" is missing`,
		`{"requirements":[],"updates":[{"action":"set-snapshot-ref","ref-name":"t","type":"label","snapshot-id":1}]}`: `"label" is not one of`,
		`{"updates":[]}`: `"requirements" is missing`,
	} {
		code, resp := raw(t, srv, "POST", "/v1/namespaces/demo/tables/events", "tok", body)
		if code != http.StatusBadRequest || errType(t, resp) != "BadRequestException" || !strings.Contains(errMessage(t, resp), want) {
			t.Errorf("POST %s: %d %s; want 400 saying %q", body, code, resp, want)
		}
	}
	if len(srv.Violations()) != 5 || len(seen) != 5 {
		t.Errorf("violations %v; want one per bad request", srv.Violations())
	}
}

// A BeforeCommit hook may answer in the server's place (a fault), or commit
// as a concurrent writer first, which fails a commit pinned to the old
// snapshot with 409.
func TestBeforeCommitHook(t *testing.T) {
	back := backing(t)
	fault := true
	srv := Start(t, back, Config{Tokens: []string{"tok"}, BeforeCommit: func(ctx context.Context, c Commit) error {
		if fault {
			return &Reply{Code: http.StatusServiceUnavailable, Type: "ServiceUnavailableException", Message: "slow down"}
		}
		// A writer moves main first.
		tbl, err := back.LoadTable(ctx, c.Ident)
		if err != nil {
			return err
		}
		_, err = gen.Append(ctx, tbl, gen.Options{Namespace: "demo", Table: "events", RowsPerAppend: 10, Partitions: 1, Seed: 1}, 1, gen.NextAppendIndex(tbl))
		return err
	}})
	cat, err := client(t, srv, map[string]string{"token": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tbl, err := cat.LoadTable(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	main := tbl.CurrentSnapshot().SnapshotID
	reqs := []table.Requirement{table.AssertRefSnapshotID("main", &main)}
	ups := []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"k": "v"})}
	if _, _, err := cat.CommitTable(ctx, events, reqs, ups); !errors.Is(err, rest.ErrCommitStateUnknown) {
		t.Errorf("commit answered 503 by the hook: %v; want ErrCommitStateUnknown", err)
	}
	fault = false
	if _, _, err := cat.CommitTable(ctx, events, reqs, ups); !errors.Is(err, table.ErrCommitFailed) {
		t.Errorf("commit after a concurrent append: %v; want ErrCommitFailed", err)
	}
	if n := srv.Requests(EndpointCommitTable); n != 2 {
		t.Errorf("%d commit requests, want 2", n)
	}
}

// The schema checks find what the spec requires: required fields, JSON
// types, enum values, integer ranges.
func TestSchemaChecks(t *testing.T) {
	cases := []struct {
		name   string
		schema func(*checker, string, any)
		body   string
		want   []string // fragments of the problems; none for a valid body
	}{
		{"error ok", (*checker).errorResponse, `{"error":{"message":"m","type":"T","code":404}}`, nil},
		{"error extra field", (*checker).errorResponse, `{"error":{"message":"m","type":"T","code":404},"x":1}`, []string{`unexpected field "x"`}},
		{"error code range", (*checker).errorResponse, `{"error":{"message":"m","type":"T","code":200}}`, []string{"outside [400, 600]"}},
		{"error code float", (*checker).errorResponse, `{"error":{"message":"m","type":"T","code":404.5}}`, []string{"want an integer"}},
		{"config", (*checker).catalogConfig, `{"defaults":{},"overrides":{"a":1},"endpoints":["GET"]}`,
			[]string{"is not \"<HTTP verb>", "$.overrides.a: want a string"}},
		{"token type", (*checker).oauthTokenResponse, `{"access_token":"x","token_type":"Bearer"}`, []string{`"Bearer" is not one of`}},
		{"metadata", (*checker).loadTableResult, `{"metadata":{"format-version":4,"table-uuid":"u",
			"snapshots":[{"snapshot-id":1,"timestamp-ms":1,"manifest-list":"m","summary":{"operation":"compact"}}],
			"refs":{"main":{"type":"trunk","snapshot-id":1}}}}`,
			[]string{"outside [1, 3]", `"trunk" is not one of`, `"compact" is not one of`}},
		{"metadata required", (*checker).commitTableResponse, `{"metadata":{}}`,
			[]string{`"metadata-location" is missing`, `"format-version" is missing`, `"table-uuid" is missing`}},
		{"list tables", (*checker).listTablesResponse, `{"identifiers":[{"namespace":"demo","name":"t"}]}`, []string{"want an array"}},
	}
	for _, c := range cases {
		got := check([]byte(c.body), c.schema)
		if len(got) != len(c.want) {
			t.Errorf("%s: problems %q; want %d", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: problem %q lacks %q", c.name, got[i], w)
			}
		}
	}
}
