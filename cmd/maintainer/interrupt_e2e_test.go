package main

// A run interrupted mid-compaction (SIGKILL, SIGTERM) leaves every table
// readable with the same rows: the table is either as it was or fully
// compacted, never in between.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// Size of the generated tables: 10 day partitions of 20 small files each,
// so a run rewrites 10 groups (2 at a time, the default) and commits them
// in one snapshot only after the last one is written. The first "group
// rewritten" line therefore comes long before the commit.
const (
	genAppends    = 200
	genRows       = 1000
	genPartitions = 10
	genCatalog    = "default" // the catalog name of config.DefaultYAML
	genNamespace  = "demo"
)

// tableState is what the test checks of a generated table.
type tableState struct {
	snapshotID int64
	parentID   int64
	operation  string // maintainer.operation of the current snapshot
	metadata   string // metadata location
	snapshots  int
	rows       int64
	sum        uint64
}

func (s tableState) compacted() bool { return s.operation == "compact" }

// genWarehouse is a warehouse in dir with generated tables in a SQL catalog
// (SQLite, or PostgreSQL: see catalogSetup), and the demo's config pointed
// at it.
type genWarehouse struct {
	dir, cfg string
	open     openCatalogFunc
}

// openCatalogFunc opens a new connection to a genWarehouse's catalog.
type openCatalogFunc func(ctx context.Context) (*sqlcat.Catalog, error)

// catalogSetup makes the catalog of a genWarehouse in dir (whose warehouse
// is dir/warehouse): how to open it, and the text of the demo's config
// pointed at it.
type catalogSetup func(t *testing.T, dir string) (openCatalogFunc, string)

// sqliteCatalog is the demo's catalog: SQLite in dir/catalog.db.
func sqliteCatalog(_ *testing.T, dir string) (openCatalogFunc, string) {
	open := func(ctx context.Context) (*sqlcat.Catalog, error) {
		return gen.OpenSQLiteCatalog(ctx, genCatalog, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	}
	return open, strings.ReplaceAll(string(config.DefaultYAML()), "${DEMO_DIR}", filepath.ToSlash(dir))
}

func newGenWarehouse(t *testing.T, tables ...string) *genWarehouse {
	t.Helper()
	return newGenWarehouseOn(t, sqliteCatalog, tables...)
}

// newGenWarehouseOn is newGenWarehouse with the catalog that setup makes.
func newGenWarehouseOn(t *testing.T, setup catalogSetup, tables ...string) *genWarehouse {
	t.Helper()
	return newGenWarehouseOf(t, setup, gen.Options{Appends: genAppends, RowsPerAppend: genRows, Partitions: genPartitions, Seed: 42}, tables...)
}

// newGenWarehouseOf is newGenWarehouseOn with tables made by opt (its
// namespace and table name set here).
func newGenWarehouseOf(t *testing.T, setup catalogSetup, opt gen.Options, tables ...string) *genWarehouse {
	t.Helper()
	dir := t.TempDir()
	open, cfgText := setup(t, dir)
	cat, err := open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for _, name := range tables {
		opt.Namespace, opt.Table = genNamespace, name
		if _, err := gen.Create(t.Context(), cat, opt); err != nil {
			t.Fatalf("generate %s: %v", name, err)
		}
	}
	return &genWarehouse{dir: dir, cfg: writeFile(t, filepath.Join(dir, "maintainer.yaml"), cfgText), open: open}
}

// state loads the table with its own catalog connection (opened and closed
// here, so that no connection is held while the binary runs).
func (w *genWarehouse) state(t *testing.T, name string) (s tableState) {
	t.Helper()
	w.withTable(t, name, func(tbl *table.Table) { s = stateOf(t, name, tbl) })
	return s
}

// withTable loads the table with its own catalog connection, closed once
// fn returned.
func (w *genWarehouse) withTable(t *testing.T, name string, fn func(*table.Table)) {
	t.Helper()
	cat, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(t.Context(), table.Identifier{genNamespace, name})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	fn(tbl)
}

func stateOf(t *testing.T, name string, tbl *table.Table) tableState {
	t.Helper()
	ctx := t.Context()
	var err error
	s := tableState{metadata: tbl.MetadataLocation(), snapshots: len(tbl.Metadata().Snapshots())}
	if cur := tbl.CurrentSnapshot(); cur != nil {
		s.snapshotID = cur.SnapshotID
		if cur.ParentSnapshotID != nil {
			s.parentID = *cur.ParentSnapshotID
		}
		if cur.Summary != nil {
			s.operation = cur.Summary.Properties["maintainer.operation"]
		}
	}
	if s.rows, s.sum, err = gen.Checksum(ctx, tbl); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return s
}

func (w *genWarehouse) tableDir(name string) string {
	return filepath.Join(w.dir, "warehouse", genNamespace+".db", name)
}

// verify reads the table's current metadata with the independent verifier.
func verifyMetadataURI(t *testing.T, metadata string) testenv.VerifyResult {
	t.Helper()
	u, err := url.Parse(metadata)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("metadata location %q is not a file URI", metadata)
	}
	return testenv.Verify(t, u.Path)
}

// watchedRun is the binary running in the background, its stderr watched
// line by line for the first "group rewritten" log line.
type watchedRun struct {
	cmd        *exec.Cmd
	stdout     bytes.Buffer
	mu         sync.Mutex
	stderr     strings.Builder
	firstGroup chan struct{} // closed at the first "group rewritten" line
	stderrEOF  chan struct{}
}

func startWatched(t *testing.T, ctx context.Context, dir string, args ...string) *watchedRun {
	t.Helper()
	w := &watchedRun{firstGroup: make(chan struct{}), stderrEOF: make(chan struct{})}
	w.cmd = exec.CommandContext(ctx, binPath, args...)
	w.cmd.Dir = dir
	w.cmd.Env = maintainerEnv()
	w.cmd.Stdout = &w.stdout
	pipe, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.stderrEOF)
		sc := bufio.NewScanner(pipe)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.stderr.WriteString(line + "\n")
			w.mu.Unlock()
			if !seen && strings.Contains(line, `msg="group rewritten"`) {
				seen = true
				close(w.firstGroup)
			}
		}
	}()
	return w
}

func (w *watchedRun) stderrText() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.String()
}

// atFirstGroup waits until the first group has been rewritten (and not
// committed: the commit comes after all ten groups). It fails the test if
// the process ends before that.
func (w *watchedRun) atFirstGroup(t *testing.T) {
	t.Helper()
	select {
	case <-w.firstGroup:
	case <-w.stderrEOF:
		_ = w.cmd.Wait()
		t.Fatalf("the run ended before it rewrote a group (%v); stdout:\n%s\nstderr:\n%s",
			w.cmd.ProcessState, w.stdout.String(), w.stderrText())
	}
}

// wait waits for the process to end and returns its state.
func (w *watchedRun) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	<-w.stderrEOF
	err := w.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	return w.cmd.ProcessState
}

// waitLine waits until a stderr line matches re and returns its submatches;
// it fails the test if the process ends first or after a minute.
func (w *watchedRun) waitLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		if m := re.FindStringSubmatch(w.stderrText()); m != nil {
			return m
		}
		select {
		case <-w.stderrEOF:
			if m := re.FindStringSubmatch(w.stderrText()); m != nil {
				return m
			}
			t.Fatalf("the process ended without logging %s; stderr:\n%s", re, w.stderrText())
		case <-deadline:
			t.Fatalf("no line matching %s after a minute; stderr:\n%s", re, w.stderrText())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// signalAtFirstGroup sends sig when the first group has been rewritten and
// returns the process's state after it ended.
func (w *watchedRun) signalAtFirstGroup(t *testing.T, sig os.Signal) *os.ProcessState {
	t.Helper()
	w.atFirstGroup(t)
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
	return w.wait(t)
}

// TestInterruptedRun kills a compaction mid-run, then terminates one, and
// checks the table each time: unchanged (or, for SIGTERM, fully compacted,
// never in between), the same rows; a later run completes the compaction.
// Both interruptions hit the same generated table, one after the other.
func TestInterruptedRun(t *testing.T) {
	t.Parallel()
	const name = "events"
	w := newGenWarehouse(t, name)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	runArgs := []string{"run", "--task", "compact", "--config", w.cfg,
		"--table", genNamespace + "." + name, "--log-level", "info", "--output", "json"}

	before := w.state(t, name)
	if before.rows != genAppends*genRows {
		t.Fatalf("generated table has %d rows, want %d", before.rows, genAppends*genRows)
	}
	verifiedBefore := verifyMetadataURI(t, before.metadata)
	if verifiedBefore.LiveRows != before.rows || verifiedBefore.DataFiles != genAppends {
		t.Fatalf("verifier reads %d rows in %d files, want %d in %d", verifiedBefore.LiveRows, verifiedBefore.DataFiles, before.rows, genAppends)
	}

	t.Run("SIGKILL", func(t *testing.T) {
		run := startWatched(t, ctx, w.dir, runArgs...)
		ps := run.signalAtFirstGroup(t, syscall.SIGKILL)
		if ps.Exited() {
			t.Fatalf("the run completed (exit %d) before SIGKILL reached it: make the table bigger (genAppends/genRows); stdout:\n%s\nstderr:\n%s",
				ps.ExitCode(), run.stdout.String(), run.stderrText())
		}
		if ws, ok := ps.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the run ended with %v, want killed by SIGKILL", ps)
		}
		if strings.Contains(run.stderrText(), "compaction committed") {
			t.Fatalf("the run committed before SIGKILL reached it: make the table bigger; stderr:\n%s", run.stderrText())
		}
		after := w.state(t, name)
		if after.snapshotID != before.snapshotID || after.metadata != before.metadata || after.snapshots != before.snapshots {
			t.Errorf("after SIGKILL the table changed: snapshot %d -> %d (operation %q), metadata %s -> %s",
				before.snapshotID, after.snapshotID, after.operation, before.metadata, after.metadata)
		}
		if after.rows != before.rows || after.sum != before.sum {
			t.Errorf("after SIGKILL: %d rows, checksum %016x; before %d, %016x", after.rows, after.sum, before.rows, before.sum)
		}
	})
	if t.Failed() {
		return
	}

	termCompacted := false
	t.Run("SIGTERM", func(t *testing.T) {
		treeBefore := treeHash(t, w.tableDir(name))
		run := startWatched(t, ctx, w.dir, runArgs...)
		ps := run.signalAtFirstGroup(t, syscall.SIGTERM)
		if !ps.Exited() {
			t.Fatalf("on SIGTERM the run did not exit by itself: %v; stderr:\n%s", ps, run.stderrText())
		}
		t.Logf("on SIGTERM the run exited with code %d; stderr:\n%s", ps.ExitCode(), run.stderrText())
		after := w.state(t, name)
		if after.rows != before.rows || after.sum != before.sum {
			t.Errorf("after SIGTERM: %d rows, checksum %016x; before %d, %016x", after.rows, after.sum, before.rows, before.sum)
		}
		outs := jsonLines[outcome](t, run.stdout.String())
		switch {
		case after.snapshotID == before.snapshotID && after.metadata == before.metadata:
			// Unchanged: the run must say that it did not finish.
			if ps.ExitCode() == 0 {
				t.Errorf("on SIGTERM the table is unchanged but the run exited 0")
			}
			if len(outs) != 1 || outs[0].Status != "failed" {
				t.Errorf("on SIGTERM the table is unchanged; outcomes %+v, want one failed", outs)
			}
			if !strings.Contains(run.stderrText(), "interrupted") {
				t.Errorf("on SIGTERM the run does not say it was interrupted:\n%s", run.stderrText())
			}
			if d := diffTrees(treeBefore, treeHash(t, w.tableDir(name))); d != "" {
				t.Logf("files the terminated run left behind (orphans):\n%s", d)
			}
		case after.compacted() && after.parentID == before.snapshotID:
			termCompacted = true
			t.Logf("the SIGTERM landed after the commit: the table is fully compacted")
			if len(outs) != 1 || outs[0].Status != "succeeded" {
				t.Errorf("on SIGTERM the table was compacted; outcomes %+v, want one succeeded", outs)
			}
			if h := tableHealth(t, w, name); h.DataFiles != genPartitions {
				t.Errorf("on SIGTERM the table was compacted into %d files, want %d (all groups)", h.DataFiles, genPartitions)
			}
		default:
			t.Errorf("after SIGTERM the table is neither unchanged nor compacted: snapshot %d -> %d (operation %q, parent %d)",
				before.snapshotID, after.snapshotID, after.operation, after.parentID)
		}
	})
	if t.Failed() {
		return
	}

	// A later run completes the compaction (or finds it done, if the
	// SIGTERM landed after the commit), rows unchanged.
	r := runMaintainer(t, w.dir, "run", "--task", "compact", "--config", w.cfg, "--table", genNamespace+"."+name, "--output", "json")
	expectCode(t, r, 0, "run after the interrupted runs")
	outs := jsonLines[outcome](t, r.stdout)
	switch {
	case len(outs) != 1:
		t.Fatalf("run after the interrupted runs: %+v, want one outcome", outs)
	case termCompacted && outs[0].Status != "not_due":
		t.Errorf("run after a compaction: %+v, want not_due", outs[0])
	case !termCompacted && (outs[0].Status != "succeeded" || outs[0].Compact == nil ||
		outs[0].Compact.FilesIn != genAppends || outs[0].Compact.FilesOut != genPartitions):
		t.Errorf("run after the interrupted runs: %+v (%+v); want succeeded rewriting %d files into %d",
			outs[0], outs[0].Compact, genAppends, genPartitions)
	}
	expectCompactedSameRows(t, "after the later run", before, w.state(t, name), verifiedBefore)
	if h := tableHealth(t, w, name); h.DataFiles != genPartitions || h.CommitsSinceCompaction != 0 {
		t.Errorf("status after the later run: %+v, want %d data files and 0 commits since compaction", h, genPartitions)
	}
}

// expectCompactedSameRows fails the test unless after is a compaction on
// top of before into genPartitions files with the same rows and checksum,
// read by gen and by the independent verifier (verifiedBefore is its
// reading of before).
func expectCompactedSameRows(t *testing.T, what string, before, after tableState, verifiedBefore testenv.VerifyResult) {
	t.Helper()
	if !after.compacted() || after.parentID != before.snapshotID {
		t.Errorf("%s: current snapshot %d (operation %q, parent %d), want a compaction on top of %d",
			what, after.snapshotID, after.operation, after.parentID, before.snapshotID)
	}
	if after.rows != before.rows || after.sum != before.sum {
		t.Errorf("%s: %d rows, checksum %016x; before %d, %016x", what, after.rows, after.sum, before.rows, before.sum)
	}
	v := verifyMetadataURI(t, after.metadata)
	if v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum || v.DataFiles != genPartitions {
		t.Errorf("verifier %s: %d rows, checksum %s, %d files; before %d, %s; want %d files",
			what, v.LiveRows, v.Checksum, v.DataFiles, verifiedBefore.LiveRows, verifiedBefore.Checksum, genPartitions)
	}
}

// tableHealth runs `maintainer status` on one generated table.
func tableHealth(t *testing.T, w *genWarehouse, name string) health {
	t.Helper()
	r := runMaintainer(t, w.dir, "status", "--config", w.cfg, "--table", genNamespace+"."+name, "--output", "json")
	expectCode(t, r, 0, "status")
	hs := jsonLines[health](t, r.stdout)
	if len(hs) != 1 || hs[0].Error != "" {
		t.Fatalf("status of %s: %+v", name, hs)
	}
	return hs[0]
}
