// Package testenv holds helpers for tests that use the real Iceberg tables in
// the shared folder (shared/fixtures, written by Spark, Flink, PyIceberg, Hive
// and Impala): finding that folder, copying a fixture into a hadoop-catalog
// warehouse with shared/tools/relocate, the expected values of
// shared/fixtures/expected.json, and reading a table with the independent
// verifier shared/tools/verify (node verify.mjs, no iceberg-go code).
//
// Only tests import this package. scripts/test.sh prepares what it needs and
// exports MAINTAINER_SHARED_DIR and MAINTAINER_VERIFY_DIR; without them the
// shared folder is looked for beside the repository and the verifier in
// <repo root>/.cache/verify.
package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/catalog/hadoop"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

// Environment variables read by this package (scripts/test.sh sets them).
const (
	// EnvSharedDir names the shared folder (holding fixtures/ and tools/).
	EnvSharedDir = "MAINTAINER_SHARED_DIR"
	// EnvVerifyDir names a folder holding verify.mjs and its node_modules.
	EnvVerifyDir = "MAINTAINER_VERIFY_DIR"
)

// RepoRoot returns the repository root: the nearest folder above the current
// directory (a test runs in its package folder) that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return root
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && fi.Mode().IsRegular() {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod in %s or any folder above it", wd)
		}
	}
}

// SharedDir returns the absolute path of the shared folder: $MAINTAINER_SHARED_DIR
// if set, else the folder named "shared" beside the repository root. It fails
// the test when neither holds fixtures/expected.json.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := sharedDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dir
}

func sharedDir() (string, error) {
	isShared := func(dir string) bool {
		fi, err := os.Stat(filepath.Join(dir, "fixtures", "expected.json"))
		return err == nil && fi.Mode().IsRegular()
	}
	if dir := os.Getenv(EnvSharedDir); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if !isShared(abs) {
			return "", fmt.Errorf("%s=%s is not the shared folder: it has no fixtures/expected.json", EnvSharedDir, dir)
		}
		return abs, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("shared folder not found (set %s): %v", EnvSharedDir, err)
	}
	dir := filepath.Join(filepath.Dir(root), "shared")
	if !isShared(dir) {
		return "", fmt.Errorf("shared folder not found: %s (beside the repository root %s) has no fixtures/expected.json; "+
			"put the shared folder there or set %s", dir, root, EnvSharedDir)
	}
	return dir, nil
}

// FixturesDir returns SharedDir/fixtures.
func FixturesDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(SharedDir(t), "fixtures")
}

// ---------------------------------------------------------------------------
// relocate

// Relocate copies fixture fixtureName (a folder of shared/fixtures) to
// catalogDir/namespace/name with shared/tools/relocate, which rewrites every
// location inside the copy, and returns the copy's current metadata file.
// The copy has the hadoop-catalog layout, so hadoop.NewCatalog(_, catalogDir,
// _) loads it as table {namespace, name}. An empty namespace means "default",
// an empty name the fixture's name. The destination must not exist or be
// empty. Warnings of the tool (e.g. a file missing from the fixture) are
// logged.
func Relocate(t testing.TB, fixtureName, catalogDir, namespace, name string) (metadataPath string) {
	t.Helper()
	src := filepath.Join(FixturesDir(t), fixtureName)
	if fi, err := os.Stat(filepath.Join(src, "metadata")); err != nil || !fi.IsDir() {
		t.Fatalf("testenv: no fixture %q: %s has no metadata/ folder", fixtureName, src)
	}
	if namespace == "" {
		namespace = "default"
	}
	if name == "" {
		name = fixtureName
	}
	got := runRelocate(t, "-catalog-dir", catalogDir, "-namespace", namespace, src, name)
	meta, ok := got[fixtureName]
	if len(got) != 1 || !ok {
		t.Fatalf("testenv: relocate %s: unexpected output %v", fixtureName, got)
	}
	if want := filepath.Join(catalogDir, namespace, name, "metadata"); !sameDir(filepath.Dir(meta), want) {
		t.Fatalf("testenv: relocate %s: metadata %s is not in %s", fixtureName, meta, want)
	}
	return meta
}

// RelocateAll relocates every fixture into catalogDir/namespace/<fixture name>
// (an empty namespace means "default") and returns the metadata file of each
// copy by fixture name.
func RelocateAll(t testing.TB, catalogDir, namespace string) map[string]string {
	t.Helper()
	if namespace == "" {
		namespace = "default"
	}
	got := runRelocate(t, "-all", catalogDir, "-namespace", namespace, FixturesDir(t))
	if len(got) == 0 {
		t.Fatalf("testenv: relocate -all %s: no tables relocated", catalogDir)
	}
	return got
}

// relocateLine is the tool's report of one table:
// "NAME -> DST/metadata/vN.metadata.json (n files copied, m rewritten)".
var relocateLine = regexp.MustCompile(`^(\S+) -> (.+) \(\d+ files copied, \d+ rewritten\)$`)

// runRelocate runs the relocate tool and returns the metadata file it printed
// for each table.
func runRelocate(t testing.TB, args ...string) map[string]string {
	t.Helper()
	bin := relocateTool(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: relocate %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "warning: "); ok {
			t.Logf("relocate: warning: %s", w)
			continue
		}
		m := relocateLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("testenv: relocate %s: cannot parse output line %q", strings.Join(args, " "), line)
		}
		if _, err := os.Stat(m[2]); err != nil {
			t.Fatalf("testenv: relocate %s: printed metadata file: %v", strings.Join(args, " "), err)
		}
		out[m[1]] = m[2]
	}
	return out
}

var relocateBuild struct {
	once sync.Once
	path string
	err  error
}

// relocateTool returns the relocate binary, building it at most once per test
// binary. The binary is kept in <repo root>/.cache/relocate/<key>/relocate,
// where key hashes the tool's sources and the Go version, so concurrent test
// binaries (go test ./...) share one build; a file lock makes them wait for
// it instead of building it side by side. The tool is its own module in the
// read-only shared folder: it is built there with -mod=readonly, writing
// nothing into it.
func relocateTool(t testing.TB) string {
	t.Helper()
	src := filepath.Join(SharedDir(t), "tools", "relocate")
	cache := filepath.Join(RepoRoot(t), ".cache", "relocate")
	relocateBuild.once.Do(func() {
		relocateBuild.path, relocateBuild.err = buildRelocate(t, src, cache)
	})
	if relocateBuild.err != nil {
		t.Fatalf("testenv: build the relocate tool from %s: %v", src, relocateBuild.err)
	}
	return relocateBuild.path
}

func buildRelocate(t testing.TB, src, cache string) (string, error) {
	key, err := sourceKey(src)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, key)
	bin := filepath.Join(dir, "relocate")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	// Closing the file (deferred above) releases the lock.
	if isExecutable(bin) {
		// Built by another test binary while we waited.
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// sourceKey hashes the names and contents of the files in dir (the tool is
// one package) with the Go version and platform.
func sourceKey(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, e := range entries { // sorted by name
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func sameDir(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// ---------------------------------------------------------------------------
// expected.json

// FixtureExpect is one fixture's entry in shared/fixtures/expected.json, as
// computed by the verifier on the original fixture. Relocation does not change
// these values. Snapshot ids exceed 2^53 and are kept as decimal strings.
type FixtureExpect struct {
	Name              string // the fixture's folder name (the key in expected.json)
	Metadata          string // metadata file the values come from, relative to the fixtures folder
	FormatVersion     int
	Location          string // the table location the writer recorded (before relocation)
	CurrentSnapshotID string
	LiveRows          int64 // of the current snapshot
	Checksum          string
	Snapshots         []SnapshotExpect // every snapshot in the metadata, in metadata order (oldest first)
}

// SnapshotExpect holds the expected values of one snapshot.
type SnapshotExpect struct {
	SnapshotID          string
	LiveRows            int64
	Checksum            string // verifier checksum, 16 hex digits
	DataFiles           int
	PositionDeleteFiles int
	DeletionVectors     int
	EqualityDeleteFiles int
	// Error is set when the snapshot cannot be read at all (spark_v2_eqdel's
	// snapshot whose manifest list is missing upstream); the other fields are
	// then zero.
	Error string
}

// Snapshot returns the expected values of snapshot id.
func (f FixtureExpect) Snapshot(id string) (SnapshotExpect, bool) {
	for _, s := range f.Snapshots {
		if s.SnapshotID == id {
			return s, true
		}
	}
	return SnapshotExpect{}, false
}

// Expected parses shared/fixtures/expected.json, keyed by fixture name.
func Expected(t testing.TB) map[string]FixtureExpect {
	t.Helper()
	path := filepath.Join(FixturesDir(t), "expected.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	var raw map[string]struct {
		Metadata          string      `json:"metadata"`
		FormatVersion     int         `json:"format_version"`
		Location          string      `json:"location"`
		CurrentSnapshotID json.Number `json:"current_snapshot_id"`
		LiveRows          json.Number `json:"live_rows"`
		Checksum          string      `json:"checksum"`
		Snapshots         []struct {
			SnapshotID          json.Number `json:"snapshot_id"`
			LiveRows            json.Number `json:"live_rows"`
			Checksum            string      `json:"checksum"`
			DataFiles           int         `json:"data_files"`
			PositionDeleteFiles int         `json:"position_delete_files"`
			DeletionVectors     int         `json:"deletion_vectors"`
			EqualityDeleteFiles int         `json:"equality_delete_files"`
			Error               string      `json:"error"`
		} `json:"snapshots"`
	}
	if err := decodeJSON(b, &raw); err != nil {
		t.Fatalf("testenv: parse %s: %v", path, err)
	}
	out := make(map[string]FixtureExpect, len(raw))
	for name, r := range raw {
		f := FixtureExpect{
			Name:              name,
			Metadata:          r.Metadata,
			FormatVersion:     r.FormatVersion,
			Location:          r.Location,
			CurrentSnapshotID: r.CurrentSnapshotID.String(),
			LiveRows:          mustInt(t, path, r.LiveRows),
			Checksum:          r.Checksum,
		}
		for _, s := range r.Snapshots {
			f.Snapshots = append(f.Snapshots, SnapshotExpect{
				SnapshotID:          s.SnapshotID.String(),
				LiveRows:            mustInt(t, path, s.LiveRows),
				Checksum:            s.Checksum,
				DataFiles:           s.DataFiles,
				PositionDeleteFiles: s.PositionDeleteFiles,
				DeletionVectors:     s.DeletionVectors,
				EqualityDeleteFiles: s.EqualityDeleteFiles,
				Error:               s.Error,
			})
		}
		out[name] = f
	}
	return out
}

// FixtureNames returns the names of the fixtures in expected.json, sorted.
func FixtureNames(t testing.TB) []string {
	t.Helper()
	names := make([]string, 0, 32)
	for name := range Expected(t) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// ---------------------------------------------------------------------------
// verify

// SnapshotResult is the verifier's report on one snapshot (its --json output).
type SnapshotResult struct {
	Metadata                  string // the metadata file read
	FormatVersion             int
	SnapshotID                string // "" when the table has no snapshot
	SchemaID                  int
	DataFiles                 int
	PositionDeleteFiles       int
	DeletionVectors           int
	EqualityDeleteFiles       int
	RowsInDataFiles           int64
	PositionDeletedRows       int64
	EqualityDeletedRows       int64
	InvalidPositionDeleteRows int64 // position-delete rows with a null file_path or pos, ignored
	LiveRows                  int64
	Checksum                  string // order-independent checksum of the live rows, 16 hex digits
	// Error is set (and only Metadata and SnapshotID besides) when this
	// snapshot could not be read; only with AllSnapshots, otherwise a read
	// error fails Verify.
	Error string
}

// VerifyResult is the outcome of one run of the verifier.
type VerifyResult struct {
	// SnapshotResult is the verified snapshot: the current one, or the one
	// chosen with SnapshotID. With AllSnapshots it is that snapshot's entry of
	// Snapshots (zero when the table has no current snapshot).
	SnapshotResult
	// Snapshots is, with AllSnapshots, every snapshot listed in the metadata
	// in metadata order (unreadable ones with Error set); otherwise just the
	// verified snapshot.
	Snapshots []SnapshotResult
}

// VerifyOption changes how Verify runs the verifier.
type VerifyOption func(*verifyConfig)

type verifyConfig struct {
	snapshotID  string
	all         bool
	strictPaths bool
	maps        [][2]string
}

// SnapshotID verifies snapshot id instead of the current one (--snapshot-id).
func SnapshotID(id string) VerifyOption {
	return func(c *verifyConfig) { c.snapshotID = id }
}

// AllSnapshots verifies every snapshot listed in the metadata
// (--all-snapshots); a snapshot that cannot be read gets Error set instead of
// failing the call.
func AllSnapshots() VerifyOption {
	return func(c *verifyConfig) { c.all = true }
}

// StrictPaths matches position-delete file_path values to data-file paths as
// raw strings, as the spec and iceberg-go do (--strict-paths), instead of
// after mapping both to local files.
func StrictPaths() VerifyOption {
	return func(c *verifyConfig) { c.strictPaths = true }
}

// MapLocation reads files whose location starts with old from local folder
// local (--map OLD=LOCAL); needed only for files outside the table location.
func MapLocation(old, local string) VerifyOption {
	return func(c *verifyConfig) { c.maps = append(c.maps, [2]string{old, local}) }
}

// Verify reads the table at tableDirOrMetadataFile (the folder holding
// metadata/, or a metadata JSON file) with the independent verifier and
// returns its report. It fails the test if the verifier cannot be run or
// cannot read the verified snapshot (see TryVerify).
func Verify(t testing.TB, tableDirOrMetadataFile string, opts ...VerifyOption) VerifyResult {
	t.Helper()
	r, err := TryVerify(t, tableDirOrMetadataFile, opts...)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return r
}

// VerifyAll is Verify with AllSnapshots: the report on every snapshot listed
// in the metadata, in metadata order.
func VerifyAll(t testing.TB, tableDirOrMetadataFile string, opts ...VerifyOption) []SnapshotResult {
	t.Helper()
	return Verify(t, tableDirOrMetadataFile, append(opts, AllSnapshots())...).Snapshots
}

// ErrVerify wraps the verifier's own error message (exit status 1): the
// table or snapshot could not be read.
var ErrVerify = errors.New("verifier could not read the table")

// TryVerify is Verify but returns an error wrapping ErrVerify, instead of
// failing the test, when the verifier reports that it cannot read the table
// or snapshot (a missing file, a corrupt manifest, an unknown snapshot id).
// Problems of the test setup (node or the verifier missing, bad output) still
// fail the test.
func TryVerify(t testing.TB, tableDirOrMetadataFile string, opts ...VerifyOption) (VerifyResult, error) {
	t.Helper()
	var cfg verifyConfig
	for _, o := range opts {
		o(&cfg)
	}
	script := verifyScript(t)
	target, err := filepath.Abs(tableDirOrMetadataFile)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	args := []string{script, "--json"}
	if cfg.all {
		args = append(args, "--all-snapshots")
	}
	if cfg.snapshotID != "" && !cfg.all {
		args = append(args, "--snapshot-id", cfg.snapshotID)
	}
	if cfg.strictPaths {
		args = append(args, "--strict-paths")
	}
	for _, m := range cfg.maps {
		args = append(args, "--map", m[0]+"="+m[1])
	}
	args = append(args, target)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), "node", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var exit *exec.ExitError
	if errors.As(runErr, &exit) && exit.ExitCode() == 1 {
		return VerifyResult{}, fmt.Errorf("%w: %s: %s", ErrVerify, tableDirOrMetadataFile, strings.TrimSpace(stderr.String()))
	}
	if runErr != nil {
		t.Fatalf("testenv: node %s: %v\n%s", strings.Join(args, " "), runErr, stderr.String())
	}

	var res VerifyResult
	if cfg.all {
		var raw []rawSnapshotResult
		if err := decodeJSON(stdout.Bytes(), &raw); err != nil {
			t.Fatalf("testenv: parse verifier output: %v\n%s", err, stdout.String())
		}
		for _, r := range raw {
			res.Snapshots = append(res.Snapshots, r.convert(t))
		}
		want := cfg.snapshotID
		if want == "" && len(res.Snapshots) > 0 {
			want = currentSnapshotID(t, res.Snapshots[0].Metadata)
		}
		for _, s := range res.Snapshots {
			if want != "" && s.SnapshotID == want {
				res.SnapshotResult = s
			}
		}
		if cfg.snapshotID != "" && res.SnapshotID == "" {
			return res, fmt.Errorf("%w: %s: no snapshot %s", ErrVerify, tableDirOrMetadataFile, cfg.snapshotID)
		}
	} else {
		var raw rawSnapshotResult
		if err := decodeJSON(stdout.Bytes(), &raw); err != nil {
			t.Fatalf("testenv: parse verifier output: %v\n%s", err, stdout.String())
		}
		res.SnapshotResult = raw.convert(t)
		res.Snapshots = []SnapshotResult{res.SnapshotResult}
	}
	return res, nil
}

// rawSnapshotResult is one object of verify.mjs --json. Counts that may exceed
// 2^53 are printed as strings, so they are decoded as json.Number, which
// accepts both.
type rawSnapshotResult struct {
	Metadata                  string      `json:"metadata"`
	FormatVersion             int         `json:"format_version"`
	SnapshotID                json.Number `json:"snapshot_id"` // string or null
	SchemaID                  int         `json:"schema_id"`
	DataFiles                 int         `json:"data_files"`
	PositionDeleteFiles       int         `json:"position_delete_files"`
	DeletionVectors           int         `json:"deletion_vectors"`
	EqualityDeleteFiles       int         `json:"equality_delete_files"`
	RowsInDataFiles           json.Number `json:"rows_in_data_files"`
	PositionDeletedRows       json.Number `json:"position_deleted_rows"`
	EqualityDeletedRows       json.Number `json:"equality_deleted_rows"`
	InvalidPositionDeleteRows json.Number `json:"invalid_position_delete_rows"`
	LiveRows                  json.Number `json:"live_rows"`
	Checksum                  string      `json:"checksum"`
	Error                     string      `json:"error"`
}

func (r rawSnapshotResult) convert(t testing.TB) SnapshotResult {
	t.Helper()
	const src = "verifier output"
	return SnapshotResult{
		Metadata:                  r.Metadata,
		FormatVersion:             r.FormatVersion,
		SnapshotID:                r.SnapshotID.String(),
		SchemaID:                  r.SchemaID,
		DataFiles:                 r.DataFiles,
		PositionDeleteFiles:       r.PositionDeleteFiles,
		DeletionVectors:           r.DeletionVectors,
		EqualityDeleteFiles:       r.EqualityDeleteFiles,
		RowsInDataFiles:           mustInt(t, src, r.RowsInDataFiles),
		PositionDeletedRows:       mustInt(t, src, r.PositionDeletedRows),
		EqualityDeletedRows:       mustInt(t, src, r.EqualityDeletedRows),
		InvalidPositionDeleteRows: mustInt(t, src, r.InvalidPositionDeleteRows),
		LiveRows:                  mustInt(t, src, r.LiveRows),
		Checksum:                  r.Checksum,
		Error:                     r.Error,
	}
}

// verifyScript returns verify.mjs of the installed verifier:
// $MAINTAINER_VERIFY_DIR, else <repo root>/.cache/verify, with its
// node_modules; scripts/test.sh puts it there. It fails the test when node or
// the installation is missing, or when the copy differs from the shared one.
func verifyScript(t testing.TB) string {
	t.Helper()
	const hint = "run scripts/test.sh once (it copies shared/tools/verify there and runs npm ci), or set " + EnvVerifyDir
	dir := os.Getenv(EnvVerifyDir)
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), ".cache", "verify")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("testenv: node (Node.js 18 or later) is not on PATH; the table verifier needs it")
	}
	script := filepath.Join(dir, "verify.mjs")
	pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("testenv: the table verifier is not installed in %s: %v; %s", dir, err, hint)
	}
	var manifest struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(pkg, &manifest); err != nil {
		t.Fatalf("testenv: %s: %v", filepath.Join(dir, "package.json"), err)
	}
	for dep := range manifest.Dependencies {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", dep, "package.json")); err != nil {
			t.Fatalf("testenv: the table verifier in %s lacks its Node dependency %s; %s", dir, dep, hint)
		}
	}
	mine, err := os.ReadFile(script)
	if err != nil {
		t.Fatalf("testenv: the table verifier is not installed in %s: %v; %s", dir, err, hint)
	}
	if shared, err := sharedDir(); err == nil {
		if orig, err := os.ReadFile(filepath.Join(shared, "tools", "verify", "verify.mjs")); err == nil && !bytes.Equal(orig, mine) {
			t.Fatalf("testenv: %s differs from %s/tools/verify/verify.mjs (stale copy); %s", script, shared, hint)
		}
	}
	return script
}

// currentSnapshotID reads current-snapshot-id from a metadata file ("" when
// there is none).
func currentSnapshotID(t testing.TB, metadataFile string) string {
	t.Helper()
	f, err := os.Open(metadataFile)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer f.Close()
	var r io.Reader = f
	head := make([]byte, 2)
	if n, _ := io.ReadFull(f, head); n == 2 && head[0] == 0x1f && head[1] == 0x8b {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("testenv: %s: %v", metadataFile, err)
		}
		r = zr
	} else {
		r = io.MultiReader(bytes.NewReader(head[:n]), f)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("testenv: %s: %v", metadataFile, err)
	}
	var meta struct {
		CurrentSnapshotID json.Number `json:"current-snapshot-id"`
	}
	if err := decodeJSON(b, &meta); err != nil {
		t.Fatalf("testenv: parse %s: %v", metadataFile, err)
	}
	if id := meta.CurrentSnapshotID.String(); id != "-1" {
		return id
	}
	return ""
}

// ---------------------------------------------------------------------------

func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func mustInt(t testing.TB, src string, n json.Number) int64 {
	t.Helper()
	if n == "" {
		return 0
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("testenv: %s: bad integer %q", src, n)
	}
	return v
}

// FixtureTable relocates fixture name into a fresh hadoop-catalog warehouse
// as table default.<name> and loads it. It returns the catalog, the table
// and the table's folder.
func FixtureTable(t testing.TB, name string) (*hadoop.Catalog, *table.Table, string) {
	t.Helper()
	wh := t.TempDir()
	Relocate(t, name, wh, "default", name)
	cat, err := hadoop.NewCatalog("fixtures", wh, nil)
	if err != nil {
		t.Fatalf("open hadoop catalog over %s: %v", wh, err)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{"default", name})
	if err != nil {
		t.Fatalf("load fixture %s: %v", name, err)
	}
	return cat, tbl, filepath.Join(wh, "default", name)
}

// GeneratedTable creates a table of opt's small-file appends (internal/gen)
// in a fresh SQLite catalog under a temporary folder, closed when the test
// ends. It returns the catalog, the table and the folder.
func GeneratedTable(t testing.TB, opt gen.Options) (*sqlcat.Catalog, *table.Table, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := gen.OpenSQLiteCatalog(ctx, "test", filepath.Join(dir, "cat.db"), filepath.Join(dir, "wh"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	tbl, err := gen.Create(ctx, cat, opt)
	if err != nil {
		t.Fatal(err)
	}
	return cat, tbl, dir
}
