package main

// The maintainer against a REST catalog: the binary talks to
// internal/resttest's server (the Iceberg REST spec's endpoints, OAuth2 and
// bearer auth, every request and response checked against the spec's
// schemas) over a SQLite catalog, through iceberg-go's REST client.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/resttest"
)

// restCredential is the OAuth2 client the test servers accept.
const restCredential = "maintainer:rest-s3cret"

// restWarehouse is a generated warehouse served by a REST catalog.
type restWarehouse struct {
	*genWarehouse
	srv  *resttest.Server
	back *sqlcat.Catalog // the server's backing catalog, also the tests' writer

	mu   sync.Mutex
	hook func(ctx context.Context, c resttest.Commit) error
}

// newRESTWarehouse generates the tables and serves them under prefix.
func newRESTWarehouse(t *testing.T, prefix string, tables ...string) *restWarehouse {
	t.Helper()
	w := &restWarehouse{genWarehouse: newGenWarehouse(t, tables...)}
	back, err := gen.OpenSQLiteCatalog(t.Context(), genCatalog, filepath.Join(w.dir, "catalog.db"), filepath.Join(w.dir, "warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close() })
	w.back = back
	w.srv = resttest.Start(t, back, resttest.Config{
		Credential: restCredential, Prefix: prefix,
		BeforeCommit: func(ctx context.Context, c resttest.Commit) error {
			w.mu.Lock()
			h := w.hook
			w.mu.Unlock()
			if h == nil {
				return nil
			}
			return h(ctx, c)
		},
	})
	return w
}

// onCommit sets the hook the server runs before each commit.
func (w *restWarehouse) onCommit(h func(ctx context.Context, c resttest.Commit) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hook = h
}

// restConfig writes a config for the REST catalog, authenticating with
// auth (a catalog key: credential_file or token_file) holding secret, and
// extra YAML.
func (w *restWarehouse) restConfig(t *testing.T, auth, secret, extra string) string {
	t.Helper()
	f := writeFile(t, filepath.Join(w.dir, "rest-secret"), secret+"\n")
	return writeFile(t, filepath.Join(w.dir, "rest.yaml"), "catalog:\n  name: "+genCatalog+"\n  type: rest\n  uri: "+w.srv.URL+
		"\n  "+auth+": "+f+"\nlock:\n  backend: local\n  ttl: 60s\n"+extra)
}

// appendOne appends one file to a table through the backing catalog, as a
// writer beside the maintainer would, and returns the table's rows and
// checksum after it.
func (w *restWarehouse) appendOne(ctx context.Context, ident table.Identifier) (int64, uint64, error) {
	tbl, err := w.back.LoadTable(ctx, ident)
	if err != nil {
		return 0, 0, err
	}
	opt := gen.Options{Namespace: genNamespace, Table: ident[1], Appends: genAppends, RowsPerAppend: genRows, Partitions: genPartitions, Seed: 42}
	if tbl, err = gen.Append(ctx, tbl, opt, 1, gen.NextAppendIndex(tbl)); err != nil {
		return 0, 0, err
	}
	return gen.Checksum(ctx, tbl)
}

// expireNow expires every snapshot but the current one.
const expireNow = "defaults:\n  expire:\n    retain_last: 1\n    max_snapshot_age: 1s\n"

// run of all three tasks through the REST catalog, under a prefix the
// server hands out in its config: files compacted, snapshots expired,
// orphans removed, rows and checksum unchanged (also for the independent
// reader), exit 0.
func TestRESTRunAllTasks(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newRESTWarehouse(t, "lake-1", name)
	cfg := w.restConfig(t, "credential_file", restCredential, expireNow)
	// The demo's planted files: three old orphans, a young one and one in
	// a staging folder.
	planted, err := plantOrphans(gen.FileURI(w.tableDir(name)))
	if err != nil {
		t.Fatal(err)
	}
	before := w.state(t, name)
	verifiedBefore := verifyMetadataURI(t, before.metadata)

	r := runMaintainer(t, w.dir, "run", "--config", cfg, "--force", "--output", "json")
	expectCode(t, r, 0, "run through the REST catalog")
	statuses := map[string]any{}
	for _, o := range jsonLines[map[string]any](t, r.stdout) {
		statuses[fmt.Sprint(o["task"])] = o["status"]
	}
	// The table has no delete files, and compaction leaves too few
	// manifests to merge.
	want := map[string]any{"compact": "succeeded", "deletes": "not_due", "manifests": "not_due", "expire": "succeeded", "orphans": "succeeded"}
	if !maps.Equal(statuses, want) {
		t.Errorf("statuses by task %v; want %v\n%s", statuses, want, r)
	}
	after := w.state(t, name)
	if !after.compacted() || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("after the run: %+v; before %+v", after, before)
	}
	if after.snapshots != 1 {
		t.Errorf("%d snapshots after expiry with retain_last 1; want 1", after.snapshots)
	}
	for _, f := range planted {
		_, err := os.Stat(f.path)
		if gone := os.IsNotExist(err); gone != f.old {
			t.Errorf("planted %s (%s): removed=%v (stat: %v)", f.rel, f.why, gone, err)
		}
	}
	v := verifyMetadataURI(t, after.metadata)
	if v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum || v.DataFiles != genPartitions {
		t.Errorf("verifier after the run: %d rows, checksum %s, %d files; before %d, %s; want %d files",
			v.LiveRows, v.Checksum, v.DataFiles, verifiedBefore.LiveRows, verifiedBefore.Checksum, genPartitions)
	}
	// It all went through the REST API: a token, then bearer requests.
	for _, e := range []string{resttest.EndpointToken, resttest.EndpointConfig, resttest.EndpointListNamespaces,
		resttest.EndpointListTables, resttest.EndpointLoadTable} {
		if w.srv.Requests(e) == 0 {
			t.Errorf("the run made no %s request", e)
		}
	}
	if n := w.srv.Requests(resttest.EndpointCommitTable); n < 2 {
		t.Errorf("%d commits through the REST catalog; want compaction's and expiry's", n)
	}

	// status through the REST catalog sees the compacted table.
	r = runMaintainer(t, w.dir, "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "status through the REST catalog")
	if hs := jsonLines[health](t, r.stdout); len(hs) != 1 || hs[0].DataFiles != genPartitions || hs[0].Snapshots != 1 {
		t.Errorf("status: %+v; want %d data files and 1 snapshot", hs, genPartitions)
	}
}

// serve against the REST catalog: a trigger over HTTP compacts the table.
func TestRESTServeTrigger(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newRESTWarehouse(t, "", name)
	token := writeFile(t, filepath.Join(w.dir, "token"), serveToken+"\n")
	// Nothing is due by its trigger: only the HTTP request starts work.
	cfg := w.restConfig(t, "credential_file", restCredential, "server: {listen: 127.0.0.1:0, token_file: "+token+"}\n"+
		"scheduler: {poll_interval: 1s}\n"+
		"defaults:\n"+
		"  compact: {trigger: {commit_count: 100000, interval: 0s, rate_limit: 0s}}\n"+
		"  expire: {enabled: false}\n"+
		"  orphans: {enabled: false}\n")
	before := w.state(t, name)
	srv := startServe(t, w.genWarehouse, cfg)
	if s := w.state(t, name); s.compacted() {
		t.Fatal("compacted before the trigger")
	}
	code, body := srv.api("POST", "/v1/trigger", serveToken, `{"table":"demo.events","tasks":["compact"],"reason":"e2e"}`)
	if code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", code, body)
	}
	srv.waitFor("compaction requested over HTTP", func() bool { return w.state(t, name).compacted() })
	if after := w.state(t, name); after.rows != before.rows || after.sum != before.sum {
		t.Errorf("rows %d/%x after compaction by serve; want %d/%x", after.rows, after.sum, before.rows, before.sum)
	}
	if h := tableHealth(t, w.genWarehouse, name); h.DataFiles != genPartitions {
		t.Errorf("data files after compaction: %d; want %d", h.DataFiles, genPartitions)
	}
	if w.srv.Requests(resttest.EndpointCommitTable) == 0 {
		t.Error("serve committed without the REST catalog")
	}
	srv.stop()
}

// A writer commits between the maintainer's plan and its commit (the
// server's hook appends just before compaction's and expiry's first
// commits): the pinned main ref fails the commit with 409, the maintainer
// re-loads and commits again, and no row is lost, the writer's included.
func TestRESTConcurrentCommitRetries(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newRESTWarehouse(t, "", name)
	cfg := w.restConfig(t, "credential_file", restCredential, expireNow)
	// The hook below appends and reads the whole table inside the catalog's
	// commit handler, which a loaded machine can stretch past the default
	// catalog.request_timeout (30s) of the commit it delays.
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = writeFile(t, cfg, strings.Replace(string(text), "\nlock:\n", "\n  request_timeout: 10m\nlock:\n", 1))
	before := w.state(t, name)

	var mu sync.Mutex
	var wantRows int64
	var wantSum uint64
	hit := map[string]bool{}
	w.onCommit(func(ctx context.Context, c resttest.Commit) error {
		mu.Lock()
		defer mu.Unlock()
		for _, action := range []string{"add-snapshot", "remove-snapshots"} {
			if c.Has(action) && !hit[action] {
				hit[action] = true
				rows, sum, err := w.appendOne(ctx, c.Ident)
				wantRows, wantSum = rows, sum
				return err
			}
		}
		return nil
	})
	r := runMaintainer(t, w.dir, "run", "--config", cfg, "--force", "--task", "compact", "--task", "expire", "--output", "json")
	expectCode(t, r, 0, "run with a writer committing before each first commit")
	mu.Lock()
	defer mu.Unlock()
	if !hit["add-snapshot"] || !hit["remove-snapshots"] {
		t.Fatalf("the hook saw %v; want compaction's and expiry's commits", hit)
	}
	for _, o := range jsonLines[map[string]any](t, r.stdout) {
		retries := -1.0
		switch o["task"] {
		case "compact":
			retries, _ = o["compact"].(map[string]any)["commit_retries"].(float64)
		case "expire":
			retries, _ = o["expire"].(map[string]any)["result"].(map[string]any)["commit_retries"].(float64)
		}
		if o["status"] != "succeeded" || retries < 1 {
			t.Errorf("%v: %v after %v retries (%v); want succeeded after a retry", o["task"], o["status"], retries, o["error"])
		}
	}
	after := w.state(t, name)
	if wantRows != before.rows+2*genRows || after.rows != wantRows || after.sum != wantSum {
		t.Errorf("after the run: %d rows, checksum %x; want %d, %x (before %d and two appends of %d)",
			after.rows, after.sum, wantRows, wantSum, before.rows, genRows)
	}
	// Expiry's re-plan never goes beyond its first plan, which kept the
	// compaction's snapshot (current then): it and the writer's remain.
	if after.snapshots != 2 || after.parentID == 0 {
		t.Errorf("%d snapshots after expiry (current %d, parent %d); want the compaction's and the writer's",
			after.snapshots, after.snapshotID, after.parentID)
	}
}

// A wrong bearer token or a wrong client secret: the catalog refuses the
// first request (GET /v1/config); exit 3 naming the catalog's endpoint,
// nothing touched.
func TestRESTWrongTokenExit3(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newRESTWarehouse(t, "", name)
	for _, c := range []struct{ auth, secret, want string }{
		{"token_file", "not-a-token", "NotAuthorizedException"},
		{"credential_file", "maintainer:wrong", "invalid_client"},
	} {
		cfg := w.restConfig(t, c.auth, c.secret, "")
		before := treeHash(t, w.dir)
		r := runMaintainer(t, w.dir, "run", "--config", cfg, "--force")
		expectCode(t, r, 3, "run with a wrong "+c.auth)
		for _, want := range []string{w.srv.URL, c.want} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.auth, want, r.stderr)
			}
		}
		if d := diffTrees(before, treeHash(t, w.dir)); d != "" {
			t.Errorf("%s: a refused run changed files:\n%s", c.auth, d)
		}
	}
	if w.srv.Requests(resttest.EndpointCommitTable) != 0 || w.srv.Requests(resttest.EndpointListNamespaces) != 0 {
		t.Error("a refused client got past the config request")
	}
}

// Expiry's tag safety on a REST catalog, where only the spec's requirements
// reach the server (README "Expiry on REST catalogs"). A tag another writer
// creates between expiry's plan and its commit:
//   - on a snapshot expiry keeps: the commit leaves it alone; it survives.
//   - on a snapshot expiry removes: no spec requirement can refuse the
//     commit, and the server drops the tag with its snapshot. The maintainer
//     finds it lost after the commit, deletes no file, and fails naming it.
func TestRESTExpireConcurrentTag(t *testing.T) {
	t.Parallel()
	const name = "events"
	ident := table.Identifier{genNamespace, name}
	for _, c := range []struct {
		name   string
		oldest bool // tag the oldest snapshot (expired) rather than the current one (kept)
	}{{"on a kept snapshot", false}, {"on an expired snapshot", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newRESTWarehouse(t, "", name)
			cfg := w.restConfig(t, "credential_file", restCredential, expireNow)
			before := w.state(t, name)
			var tagged atomic.Int64 // set by the server's handler
			w.onCommit(func(ctx context.Context, cm resttest.Commit) error {
				if !cm.Has("remove-snapshots") || tagged.Load() != 0 {
					return nil
				}
				tbl, err := w.back.LoadTable(ctx, ident)
				if err != nil {
					return err
				}
				id := tbl.CurrentSnapshot().SnapshotID
				if c.oldest {
					id = tbl.Metadata().Snapshots()[0].SnapshotID
				}
				tagged.Store(id)
				_, _, err = w.back.CommitTable(ctx, ident, []table.Requirement{table.AssertRefSnapshotID("audit", nil)},
					[]table.Update{table.NewSetSnapshotRefUpdate("audit", id, table.TagRef, 0, 0, 0)})
				return err
			})
			filesBefore := treeHash(t, w.tableDir(name))
			r := runMaintainer(t, w.dir, "run", "--config", cfg, "--force", "--task", "expire", "--output", "json")
			tbl, err := w.back.LoadTable(t.Context(), ident)
			if err != nil {
				t.Fatal(err)
			}
			refs := map[string]int64{}
			for n, r := range tbl.Metadata().Refs() {
				refs[n] = r.SnapshotID
			}
			after := w.state(t, name)
			if after.rows != before.rows || after.sum != before.sum || after.snapshotID != before.snapshotID {
				t.Errorf("table after expiry: %+v; before %+v", after, before)
			}
			outs := jsonLines[map[string]any](t, r.stdout)
			if len(outs) != 1 {
				t.Fatalf("outcomes %v; want one\n%s", outs, r)
			}
			if !c.oldest {
				expectCode(t, r, 0, "expiry with a tag created on the current snapshot")
				if refs["audit"] != tagged.Load() || after.snapshots != 1 || outs[0]["status"] != "succeeded" {
					t.Errorf("refs %v (tagged %d), %d snapshots, outcome %v; want the tag kept and 1 snapshot", refs, tagged.Load(), after.snapshots, outs[0])
				}
				return
			}
			expectCode(t, r, 1, "expiry with a tag created on an expiring snapshot")
			if msg := fmt.Sprint(outs[0]["error"]); outs[0]["status"] != "failed" || !strings.Contains(msg, "audit") || !strings.Contains(msg, "no file was deleted") {
				t.Errorf("outcome %v; want failed naming the lost tag \"audit\"", outs[0])
			}
			if _, ok := refs["audit"]; ok {
				t.Errorf("refs %v: the server kept the tag; this test documents that it cannot", refs)
			}
			// No file was deleted: every file of the table is still there.
			filesAfter := treeHash(t, w.tableDir(name))
			for p := range filesBefore {
				if _, ok := filesAfter[p]; !ok {
					t.Errorf("expiry deleted %s after losing a tag", p)
				}
			}
			if !slices.ContainsFunc(strings.Split(r.stderr, "\n"), func(l string) bool {
				return strings.Contains(l, "ref lost") && strings.Contains(l, "ref=audit")
			}) {
				t.Errorf("the log does not say the tag was lost:\n%s", r.stderr)
			}
		})
	}
}
