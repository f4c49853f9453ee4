package main

// End-to-end tests of the maintainer binary: TestMain builds the real binary
// once, and every test drives it as a user would (a subprocess with
// arguments, a config file, a warehouse on disk), asserting exit codes,
// stdout/stderr, JSON fields, files on disk and rows read back by an
// independent reader. No test asserts elapsed time.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/pqzstd"
	"github.com/iceberg-maintainer/maintainer/maintenance"
)

// Values the binary is built with (-ldflags -X), to check that `version`
// reports what the build stamped.
const (
	buildVersion = "v0.0.0-e2e"
	buildCommit  = "e2e0c0ffee"
	// icebergGoVersion is the iceberg-go version of go.mod.
	icebergGoVersion = "v0.7.0"
	// unsetVar is an environment variable no test environment sets; the
	// tests remove it from the subprocess environment anyway.
	unsetVar = "MAINTAINER_E2E_SURELY_UNSET_VAR"
)

// binPath is the maintainer binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "maintainer-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "maintainer")
	cmd := exec.Command("go", "build", "-o", binPath,
		"-ldflags", "-X main.version="+buildVersion+" -X main.commit="+buildCommit, ".")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build ./cmd/maintainer:", err)
		return 1
	}
	// The tests that call run in this process use main's zstd codec too.
	if err := pqzstd.Register(); err != nil {
		fmt.Fprintln(os.Stderr, "register the zstd codec:", err)
		return 1
	}
	return m.Run()
}

// result is what one invocation of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// maintainerEnv is the environment of the subprocess: the test's, without
// unsetVar.
func maintainerEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, unsetVar+"=") })
}

// runMaintainer runs the binary with args in dir (a new empty temp dir when
// dir is "") and returns its exit code and output. It fails the test if the
// binary cannot be started or is killed by a signal.
func runMaintainer(t *testing.T, dir string, args ...string) result {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	cmd.Env = maintainerEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("maintainer %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	t.Logf("maintainer %s -> exit %d", strings.Join(args, " "), r.code)
	return r
}

// expectCode fails the test unless r exited with want.
func expectCode(t *testing.T, r result, want int, what string) {
	t.Helper()
	if r.code != want {
		t.Fatalf("%s: exit code %d, want %d\n%s", what, r.code, want, r)
	}
}

// jsonLines decodes one JSON object per non-empty line of s into []T.
func jsonLines[T any](t *testing.T, s string) []T {
	t.Helper()
	var out []T
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d of the JSON output is not a JSON object: %v\n%s", i+1, err, line)
		}
		out = append(out, v)
	}
	return out
}

// outcome is one JSON line of run/plan --output json.
type outcome struct {
	Table   string         `json:"table"`
	Task    string         `json:"task"`
	Status  string         `json:"status"`
	Reason  string         `json:"reason"`
	Error   string         `json:"error"`
	Compact *compactReport `json:"compact"`
}

type compactReport struct {
	SnapshotID  int64   `json:"snapshot_id"`
	Groups      []any   `json:"groups"`
	FilesIn     int     `json:"files_in"`
	FilesOut    int     `json:"files_out"`
	RowsRead    int64   `json:"rows_read"`
	RowsWritten int64   `json:"rows_written"`
	Commits     []int64 `json:"commits"`
}

// health is one JSON line of status --output json.
type health struct {
	Table                  string `json:"table"`
	CurrentSnapshotID      int64  `json:"current_snapshot_id"`
	DataFiles              int    `json:"data_files"`
	PositionDeleteFiles    int    `json:"position_delete_files"`
	Snapshots              int    `json:"snapshots"`
	CommitsSinceCompaction int    `json:"commits_since_compaction"`
	Error                  string `json:"error"`
}

func byTable[T any](items []T, name func(T) string) map[string]T {
	m := make(map[string]T, len(items))
	for _, it := range items {
		m[name(it)] = it
	}
	return m
}

// treeHash returns every file and folder under root with the SHA-256 of
// each file's contents: two equal results mean a byte-identical tree.
func treeHash(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", root, err)
	}
	return out
}

// diffTrees describes how two treeHash results differ ("" when equal).
func diffTrees(before, after map[string]string) string {
	var b strings.Builder
	for p, h := range before {
		switch a, ok := after[p]; {
		case !ok:
			fmt.Fprintf(&b, "  removed %s\n", p)
		case a != h:
			fmt.Fprintf(&b, "  changed %s\n", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			fmt.Fprintf(&b, "  added %s\n", p)
		}
	}
	return b.String()
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------------------
// 1. version

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runMaintainer(t, "", "version")
	expectCode(t, r, 0, "version")
	for _, want := range []string{"maintainer " + buildVersion, "commit " + buildCommit, runtime.Version(), "iceberg-go " + icebergGoVersion} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runMaintainer(t, "", "version", "--output", "json")
	expectCode(t, r, 0, "version --output json")
	var v map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("version --output json is not a JSON object: %v\n%s", err, r.stdout)
	}
	want := map[string]string{"version": buildVersion, "commit": buildCommit, "go": runtime.Version(), "iceberg_go": icebergGoVersion}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("version JSON %q = %q, want %q (all: %v)", k, v[k], w, v)
		}
	}
}

// ---------------------------------------------------------------------------
// 2. usage errors

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		args   []string
		stderr string // a fragment of the message
	}{
		{"unknown command", []string{"nosuch"}, `unknown command "nosuch"`},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"flag without value", []string{"run", "--output"}, "--output"},
		{"output yaml", []string{"status", "--output", "yaml"}, `--output must be text or json, got "yaml"`},
		{"unknown task", []string{"run", "--task", "nosuch"}, `--task "nosuch" is not a task`},
		{"empty table glob", []string{"run", "--table", ""}, "empty pattern"},
		{"table glob empty level", []string{"plan", "--table", "db..events"}, `--table "db..events"`},
		{"table glob partial **", []string{"run", "--table", "db.ev**"}, "** must be a whole level"},
		{"bad log level", []string{"run", "--log-level", "loud"}, `--log-level "loud"`},
		{"positional argument", []string{"run", "extra"}, `unknown command "extra"`},
		{"config validate without --config", []string{"config", "validate"}, "config validate needs --config"},
		{"config validate missing file", []string{"config", "validate", "--config", "missing.yaml"}, "cannot read config file"},
		{"demo zero appends", []string{"demo", "--appends", "0"}, "--appends"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// In an empty folder: the embedded default config would put a
			// SQLite catalog here if anything ran.
			dir := t.TempDir()
			r := runMaintainer(t, dir, c.args...)
			expectCode(t, r, 2, strings.Join(c.args, " "))
			if !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("stderr does not start with \"error: \":\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty on a usage error:\n%s", r.stdout)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("a usage error wrote into the working folder: %v", entries)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 3. config validate, and run with a bad config

// badConfig has four problems: an unset ${VAR} (line 3), an unknown key
// (line 4), a bad size (line 7) and min_input_files 0 (line 8).
const badConfig = "catalog:\n" +
	"  type: hadoop\n" +
	"  warehouse: ${" + unsetVar + "}\n" +
	"  bogus_key: 1\n" +
	"defaults:\n" +
	"  compact:\n" +
	"    target_file_size: 12XB\n" +
	"    min_input_files: 0\n"

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), badConfig)
	r := runMaintainer(t, dir, "config", "validate", "--config", bad)
	expectCode(t, r, 2, "config validate of a bad config")
	if r.stdout != "" {
		t.Errorf("stdout should be empty:\n%s", r.stdout)
	}
	// Each problem: file:line:col: path: message; the column may be the
	// key's or the value's.
	problems := []struct {
		line     int
		cols     []int
		path     string
		fragment string
	}{
		{3, []int{3, 14}, "catalog.warehouse", unsetVar},
		{4, []int{3, 14}, "catalog.bogus_key", "unknown key"},
		{7, []int{5, 23}, "defaults.compact.target_file_size", "12XB"},
		{8, []int{5, 22}, "defaults.compact.min_input_files", "at least 1"},
	}
	for _, p := range problems {
		re := regexp.MustCompile(`(?m)^(?:error: )?` + regexp.QuoteMeta(bad) + fmt.Sprintf(`:%d:(\d+): `, p.line) +
			regexp.QuoteMeta(p.path) + `: (.*)$`)
		m := re.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Errorf("no problem %s:%d:<col>: %s: ... in the output:\n%s", bad, p.line, p.path, r.stderr)
			continue
		}
		if col, _ := strconv.Atoi(m[1]); !slices.Contains(p.cols, col) {
			t.Errorf("problem %s at column %d, want one of %v:\n%s", p.path, col, p.cols, m[0])
		}
		if !strings.Contains(m[2], p.fragment) {
			t.Errorf("problem %s: message %q lacks %q", p.path, m[2], p.fragment)
		}
	}
	if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n != len(problems) {
		t.Errorf("%d lines of problems, want %d (one per problem):\n%s", n, len(problems), r.stderr)
	}

	good := writeFile(t, filepath.Join(dir, "good.yaml"), "catalog:\n"+
		"  name: lake\n"+
		"  type: hadoop\n"+
		"  warehouse: ${"+unsetVar+":-"+filepath.Join(dir, "wh")+"}\n"+
		"defaults:\n"+
		"  compact:\n"+
		"    target_file_size: 64MiB\n"+
		"    min_input_files: 2\n"+
		"tables:\n"+
		"  - match: \"default.spark_*\"\n"+
		"    compact:\n"+
		"      delete_file_threshold: 1\n")
	r = runMaintainer(t, dir, "config", "validate", "--config", good)
	expectCode(t, r, 0, "config validate of a good config")
	for _, want := range []string{good, "valid", "hadoop", `"lake"`, "1 table rule"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config validate output lacks %q:\n%s", want, r.stdout)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("config validate wrote into the folder: %v", entries)
	}
}

// TestRunWithBadConfigTouchesNothing: a run with a bad config exits 2
// before opening the catalog, so a warehouse its catalog.warehouse names
// is left byte-identical.
func TestRunWithBadConfigTouchesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wh := relocateWarehouse(t, filepath.Join(dir, "wh"), "spark_v1_unpartitioned_20files")
	// A config whose catalog is fine (it would compact the table) but
	// whose compact settings are not.
	cfg := writeFile(t, filepath.Join(dir, "bad.yaml"), "catalog:\n"+
		"  type: hadoop\n"+
		"  warehouse: "+wh+"\n"+
		"defaults:\n"+
		"  compact:\n"+
		"    min_input_files: 0\n"+
		"    target_file_size: 12XB\n"+
		"    bogus_key: 1\n")
	before := treeHash(t, dir)
	for _, args := range [][]string{
		{"run", "--config", cfg, "--force"},
		{"run", "--config", cfg, "--output", "json", "--task", "compact"},
		{"plan", "--config", cfg},
		{"status", "--config", cfg},
	} {
		r := runMaintainer(t, dir, args...)
		expectCode(t, r, 2, strings.Join(args, " "))
		if r.stdout != "" {
			t.Errorf("%s: stdout should be empty:\n%s", strings.Join(args, " "), r.stdout)
		}
		for _, want := range []string{cfg + ":6:", cfg + ":7:", cfg + ":8:"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks the problem at %s:\n%s", strings.Join(args, " "), want, r.stderr)
			}
		}
	}
	if d := diffTrees(before, treeHash(t, dir)); d != "" {
		t.Errorf("a run with a bad config changed files:\n%s", d)
	}
}

// ---------------------------------------------------------------------------
// 4. catalog unreachable: exit 3

func TestCatalogUnreachableExit3(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notADB := filepath.Join(dir, "not-a-sqlite-file")
	if err := os.Mkdir(notADB, 0o755); err != nil {
		t.Fatal(err)
	}
	configs := []struct {
		name, yaml string
		stderr     []string
	}{{
		name:   "rest closed loopback port",
		yaml:   "catalog:\n  type: rest\n  uri: http://127.0.0.1:1\n",
		stderr: []string{"rest catalog", "127.0.0.1:1"},
	}, {
		name: "sql catalog on a directory",
		yaml: "catalog:\n  type: sql\n  uri: \"file:" + filepath.ToSlash(notADB) + "\"\n" +
			"  properties:\n    sql.driver: sqliteshim\n    sql.dialect: sqlite\n",
		stderr: []string{"sql catalog", "unable to open database file"},
	}, {
		name:   "hadoop warehouse missing",
		yaml:   "catalog:\n  type: hadoop\n  warehouse: " + filepath.Join(dir, "no-such-warehouse") + "\n",
		stderr: []string{"no-such-warehouse", "no such file or directory"},
	}}
	for i, c := range configs {
		cfg := writeFile(t, filepath.Join(dir, fmt.Sprintf("c%d.yaml", i)), c.yaml)
		expectUnreachable(t, dir, c.name, cfg, c.stderr, nil)
	}
	if entries, _ := os.ReadDir(notADB); len(entries) > 0 {
		t.Errorf("the maintainer wrote into %s: %v", notADB, entries)
	}
}

// expectUnreachable runs run, plan and status with cfg in dir, a subtest
// each (name/command): each must exit 3 having worked on no table, with a
// stderr that starts with "error: " and holds every fragment of want; check,
// when set, looks at each result too.
func expectUnreachable(t *testing.T, dir, name, cfg string, want []string, check func(*testing.T, result)) {
	t.Helper()
	for _, cmd := range []string{"run", "plan", "status"} {
		t.Run(name+"/"+cmd, func(t *testing.T) {
			r := runMaintainer(t, dir, cmd, "--config", cfg, "--output", "json")
			expectCode(t, r, 3, cmd+" against an unreachable catalog")
			if r.stdout != "" {
				t.Errorf("stdout should be empty (no table was worked on):\n%s", r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("stderr does not start with \"error: \":\n%s", r.stderr)
			}
			for _, w := range want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if check != nil {
				check(t, r)
			}
		})
	}
}

// TestMissingSQLiteCatalog: a sql catalog whose SQLite file does not exist
// (a typo in catalog.uri) is unreachable; plan, which "writes nothing", must
// not create an empty catalog there and report success.
func TestMissingSQLiteCatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "typo.yaml"), "catalog:\n  type: sql\n"+
		"  uri: \"file:"+filepath.ToSlash(filepath.Join(dir, "catlog.db"))+"\"\n"+
		"  properties:\n    sql.driver: sqliteshim\n    sql.dialect: sqlite\n")
	before := treeHash(t, dir)
	r := runMaintainer(t, dir, "plan", "--config", cfg)
	if d := diffTrees(before, treeHash(t, dir)); d != "" {
		t.Errorf("plan against a missing SQLite catalog wrote files:\n%s", d)
	}
	expectCode(t, r, 3, "plan against a missing SQLite catalog file")
}

// TestCatalogErrorResponseExit3: a REST catalog (a loopback test server)
// that answers every request with 503 is unreachable: exit 3, whatever the
// words of the server's message.
func TestCatalogErrorResponseExit3(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		"the catalog is down for maintenance",
		// cmd/maintainer/cli.go isCobraUsage classifies errors by substrings
		// such as "requires " and "invalid argument"; a catalog's own message
		// must not turn exit 3 into exit 2.
		"the catalog requires a restart",
		"invalid argument from the backing store",
	} {
		t.Run(msg, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, `{"error":{"message":%q,"type":"ServiceUnavailableException","code":503}}`, msg)
			}))
			defer srv.Close()
			if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
				t.Fatalf("test server is not on loopback: %s", srv.URL)
			}
			dir := t.TempDir()
			cfg := writeFile(t, filepath.Join(dir, "rest.yaml"), "catalog:\n  type: rest\n  uri: "+srv.URL+"\n")
			r := runMaintainer(t, dir, "run", "--config", cfg)
			if !strings.Contains(r.stderr, msg) {
				t.Errorf("stderr lacks the catalog's message %q:\n%s", msg, r.stderr)
			}
			expectCode(t, r, 3, "run against a REST catalog answering 503")
		})
	}
}

// ---------------------------------------------------------------------------
// 9. demo

func TestDemo(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "demo")
	r := runMaintainer(t, "", "demo", "--dir", d, "--appends", "24", "--rows", "200", "--partitions", "3")
	expectCode(t, r, 0, "demo")
	for _, want := range []string{"every row is unchanged", "24 data files became 3", filepath.Join(d, "maintainer.yaml"),
		"manifests  succeeded: rewrote 24 manifests into 1 (24 entries)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	cfg := filepath.Join(d, "maintainer.yaml")
	if _, err := os.Stat(cfg); err != nil {
		t.Fatalf("demo did not write its config: %v", err)
	}

	r = runMaintainer(t, "", "config", "validate", "--config", cfg)
	expectCode(t, r, 0, "config validate of the demo's config")

	r = runMaintainer(t, "", "status", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "status on the demo's warehouse")
	hs := jsonLines[health](t, r.stdout)
	if len(hs) != 1 || hs[0].Table != "demo.events" {
		t.Fatalf("status shows %+v, want exactly demo.events", hs)
	}
	h := hs[0]
	// The demo expires every snapshot but the current one (retain_last 1).
	if h.Error != "" || h.DataFiles != 3 || h.CommitsSinceCompaction != 0 || h.Snapshots != 1 {
		t.Errorf("status of the demo table: %+v; want 3 data files, 0 commits since compaction, 1 snapshot", h)
	}

	// --task shows only that task's last run (the demo ran all three).
	r = runMaintainer(t, "", "status", "--config", cfg, "--task", "expire", "--output", "json")
	expectCode(t, r, 0, "status --task expire")
	type lastRuns struct {
		Tasks []struct {
			Task       string `json:"task"`
			LastResult string `json:"last_result"`
		} `json:"tasks"`
	}
	only := jsonLines[lastRuns](t, r.stdout)
	if len(only) != 1 || len(only[0].Tasks) != 1 || only[0].Tasks[0].Task != "expire" || only[0].Tasks[0].LastResult == "" {
		t.Errorf("status --task expire: %s; want the last run of expire only", r.stdout)
	}

	// The text form works too, and the next pass has nothing to do.
	r = runMaintainer(t, "", "status", "--config", cfg)
	expectCode(t, r, 0, "status (text)")
	if !strings.Contains(r.stdout, "demo.events") || !strings.Contains(r.stdout, "data files          3") {
		t.Errorf("status text output:\n%s", r.stdout)
	}
	r = runMaintainer(t, "", "run", "--config", cfg, "--output", "json")
	expectCode(t, r, 0, "run after the demo")
	outs := jsonLines[outcome](t, r.stdout)
	if len(outs) != len(maintenance.TaskNames()) {
		t.Errorf("run after the demo: %+v, want an outcome of every task", outs)
	}
	for _, o := range outs {
		if o.Status != "not_due" {
			t.Errorf("run after the demo: %s is %s (%s), want not_due", o.Task, o.Status, o.Reason)
		}
	}

	// The demo refuses a folder that is not empty.
	r = runMaintainer(t, "", "demo", "--dir", d, "--appends", "2")
	expectCode(t, r, 2, "demo into a non-empty folder")
	if !strings.Contains(r.stderr, "not empty") {
		t.Errorf("stderr: %s", r.stderr)
	}
}
