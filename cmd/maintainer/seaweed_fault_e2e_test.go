package main

// The binary against a SeaweedFS server of the test's own (seaweed.Start)
// that the test stops (SIGSTOP) part way through a task: a stalled S3
// server fails the task within request_timeout × max_attempts, naming the
// endpoint, and changes nothing; serve stays ready and keeps maintaining a
// table elsewhere; expiry whose deletes stall fails, and the next run
// deletes what it kept to retry.

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/s3test/seaweed"
)

const (
	// stallLimits make a request to a stopped server fail after about 1s
	// twice (and a backoff between): a few seconds a request.
	stallLimits = "object_store: {request_timeout: 1s, max_attempts: 2}\n"
	// stallBound is how long a task on a stopped server may take to fail:
	// generous, the order of magnitude is what is checked.
	stallBound = 60 * time.Second
)

// stalledHost is the host:port of srv, as errors name it.
func stalledHost(t *testing.T, srv *seaweed.Server) string {
	t.Helper()
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// A compaction whose S3 server stops after the first of its groups was
// written (one group at a time, so that the commit is still ahead) fails
// within the bound with exit 1, naming the endpoint; once the server is
// back the table is as before: the same metadata, rows and checksum, and no
// file the failed run wrote is referenced.
func TestSeaweedStalledCompactionFails(t *testing.T) {
	t.Parallel()
	srv := seaweed.Start(t)
	opt := weedGen
	opt.Appends, opt.Partitions = 32, 8 // eight groups: seven left when the server stops
	w := newWeedWarehouseOn(t, srv, opt, stallLimits+"defaults:\n  compact: {max_concurrent_groups: 1, min_input_files: 2}\n")
	before := w.state(t, weedTable)
	verifiedBefore := w.verify(t, before.metadata)
	keys0 := w.keys(t)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := startWatched(t, ctx, w.dir, "run", "--task", "compact", "--config", w.cfg, "--output", "json")
	run.atFirstGroup(t)
	srv.Pause(t)
	paused := time.Now()
	st := run.wait(t)
	took := time.Since(paused)
	srv.Resume(t)
	t.Logf("the run ended %s after the server stopped", took.Round(time.Millisecond))
	if st.ExitCode() != 1 {
		t.Fatalf("run on a stopped server: %v; want exit 1\nstdout:\n%s\nstderr:\n%s", st, run.stdout.String(), run.stderrText())
	}
	if took > stallBound {
		t.Errorf("the run took %s after the server stopped; want it to fail within %s", took, stallBound)
	}
	host := stalledHost(t, srv)
	outs := jsonLines[outcome](t, run.stdout.String())
	if len(outs) != 1 || outs[0].Status != "failed" || !strings.Contains(outs[0].Error, host) {
		t.Errorf("outcomes %+v; want compaction failed with an error naming %s", outs, host)
	}
	if !strings.Contains(run.stderrText(), "object store request failed; retrying") {
		t.Errorf("no retry was logged:\n%s", run.stderrText())
	}

	after := w.state(t, weedTable)
	if after.metadata != before.metadata || after.snapshotID != before.snapshotID || after.rows != before.rows || after.sum != before.sum {
		t.Errorf("after the failed run: %+v; want the table as before, %+v", after, before)
	}
	if v := w.verify(t, after.metadata); v.LiveRows != verifiedBefore.LiveRows || v.Checksum != verifiedBefore.Checksum {
		t.Errorf("verifier after the failed run: %d rows (%s); want %d (%s)", v.LiveRows, v.Checksum, verifiedBefore.LiveRows, verifiedBefore.Checksum)
	}
	keys := w.keys(t)
	for k := range w.referenced(t) {
		if !keys0[k] {
			t.Errorf("%s, written by the failed run, is referenced", k)
		}
	}
	expectPresent(t, "after the failed run", keys0, keys)
}

// serve over two tables of one catalog, one on a stopped S3 server and one
// on the local disk: triggered, the stalled one fails within the bound and
// shows failed in /v1/status, the local one is compacted with its rows,
// /healthz and /readyz answer 200 throughout, and SIGTERM ends serve with
// exit 0 while the server is still stopped.
func TestSeaweedServeStaysReadyForOtherTables(t *testing.T) {
	t.Parallel()
	const localTable = "local"
	srv := seaweed.Start(t)
	token := writeFile(t, filepath.Join(t.TempDir(), "token"), serveToken+"\n")
	w := newWeedWarehouseOn(t, srv, weedGen, stallLimits+
		"server: {listen: 127.0.0.1:0, token_file: "+token+"}\n"+
		"scheduler: {poll_interval: 1s}\n"+
		"defaults:\n"+
		"  compact: {enabled: true, trigger: {commit_count: 100000, interval: 0s, rate_limit: 0s}}\n"+
		"  expire: {enabled: false}\n"+
		"  orphans: {enabled: false}\n")
	// The second table: the same SQLite catalog, a file:// warehouse.
	cat, err := gen.OpenSQLiteCatalog(t.Context(), genCatalog, filepath.Join(w.dir, "catalog.db"), filepath.Join(w.dir, "local"))
	if err != nil {
		t.Fatal(err)
	}
	opt := weedGen
	opt.Table = localTable
	_, err = gen.Create(t.Context(), cat, opt)
	cat.Close()
	if err != nil {
		t.Fatalf("generate %s on the local disk: %v", localTable, err)
	}
	localBefore := w.state(t, localTable)
	if !strings.HasPrefix(localBefore.metadata, "file://") {
		t.Fatalf("the local table's metadata is at %s", localBefore.metadata)
	}

	p := startServe(t, w.genWarehouse, w.cfg)
	srv.Pause(t)
	probesOK := func(when string) {
		t.Helper()
		for _, probe := range []string{"/healthz", "/readyz"} {
			if code, body := p.api("GET", probe, "", ""); code != http.StatusOK {
				t.Errorf("%s %s: %d %s", probe, when, code, body)
			}
		}
	}
	triggered := time.Now()
	for _, name := range []string{weedTable, localTable} {
		if code, body := p.api("POST", "/v1/trigger", serveToken, `{"table":"`+genNamespace+`.`+name+`","tasks":["compact"],"reason":"e2e"}`); code != http.StatusAccepted {
			t.Fatalf("trigger %s: %d %s", name, code, body)
		}
	}
	probesOK("with the S3 server stopped")
	host := stalledHost(t, srv)
	var failure string
	p.waitFor("the stalled table's compaction to fail", func() bool {
		probesOK("while the stalled task runs")
		for _, o := range p.status().Recent {
			if o.Table == genNamespace+"."+weedTable && o.Task == "compact" && o.Status == "failed" {
				failure = o.Error
				return true
			}
		}
		return false
	})
	took := time.Since(triggered)
	t.Logf("the stalled table's compaction failed %s after the trigger: %s", took.Round(time.Millisecond), failure)
	if took > stallBound {
		t.Errorf("the stalled table's compaction failed %s after the trigger; want within %s", took, stallBound)
	}
	if !strings.Contains(failure, host) {
		t.Errorf("the failure in /v1/status does not name %s: %s", host, failure)
	}
	p.waitFor("the local table's compaction", func() bool { return w.state(t, localTable).compacted() })
	local := w.state(t, localTable)
	if local.parentID != localBefore.snapshotID || local.rows != localBefore.rows || local.sum != localBefore.sum {
		t.Errorf("the local table: %+v; want a compaction of %+v with its rows", local, localBefore)
	}
	probesOK("after both tasks")
	stopping := time.Now()
	p.stop()
	if took := time.Since(stopping); took > 30*time.Second {
		t.Errorf("serve took %s to stop after SIGTERM", took)
	}
	srv.Resume(t)
	if s := w.state(t, weedTable); s.compacted() {
		t.Errorf("the stalled table was compacted: %+v", s)
	}
}

// Expiry whose S3 server stops as soon as the first of its deletes is done
// (one delete request at a time): either the deletes were all done before
// the server stopped (exit 0), or the run fails (exit 1) saying deletes
// failed, and the next run, with the server back, deletes the files it kept
// to retry. Either way the writers' data
// files end up deleted and every referenced file and every row is there.
func TestSeaweedExpiryDeletesStalled(t *testing.T) {
	t.Parallel()
	srv := seaweed.Start(t)
	state := filepath.Join(t.TempDir(), "state.json")
	opt := weedGen
	opt.Appends = 48
	w := newWeedWarehouseOn(t, srv, opt, demoOverride+stallLimits+
		"scheduler: {state_file: "+state+"}\n"+
		"defaults:\n  expire: {delete_concurrency: 1, trigger: {rate_limit: 0s}}\n")
	inputs := parquetKeys(w.keys(t)) // the writers' files: compacted, then expired
	if len(inputs) != opt.Appends {
		t.Fatalf("generated table: %d data files; want %d", len(inputs), opt.Appends)
	}
	w.runTask(t, "compact")
	compacted := w.state(t, weedTable)
	verified := w.verify(t, compacted.metadata)
	time.Sleep(1100 * time.Millisecond) // demoOverride: max_snapshot_age 1s

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := startWatched(t, ctx, w.dir, "run", "--task", "expire", "--config", w.cfg, "--output", "json")
	// The deletes come last, after the commit and a re-check of the
	// references (a stop during those deletes nothing): the first input gone
	// says they have begun.
	gone := 0
	for gone == 0 {
		keys := w.keys(t)
		for k := range inputs {
			if !keys[k] {
				gone++
			}
		}
		select {
		case <-run.stderrEOF:
			if gone == 0 {
				t.Fatalf("the run ended before deleting; stdout:\n%s\nstderr:\n%s", run.stdout.String(), run.stderrText())
			}
		default:
		}
	}
	srv.Pause(t)
	paused := time.Now()
	st := run.wait(t)
	took := time.Since(paused)
	srv.Resume(t)
	t.Logf("the server stopped with %d of the %d inputs deleted; the run ended %s later", gone, len(inputs), took.Round(time.Millisecond))
	if took > stallBound {
		t.Errorf("the run took %s after the server stopped; want it to end within %s", took, stallBound)
	}
	outs := jsonLines[outcome](t, run.stdout.String())
	if len(outs) != 1 || outs[0].Task != "expire" {
		t.Fatalf("outcomes %+v\nstderr:\n%s", outs, run.stderrText())
	}
	switch st.ExitCode() {
	case 0:
		t.Logf("the server stopped after every delete was done: run 1 succeeded (%s)", outs[0].Reason)
		if outs[0].Status != "succeeded" {
			t.Errorf("exit 0 with outcome %+v", outs[0])
		}
	case 1:
		t.Logf("the server stopped with deletes in flight: run 1 failed (%s), run 2 retries", outs[0].Reason)
		if outs[0].Status != "failed" || !strings.Contains(outs[0].Reason, "deletes failed") {
			t.Errorf("exit 1 with outcome %+v; want failed, saying deletes failed", outs[0])
		}
		expectPresent(t, "after the failed deletes", w.referenced(t), w.keys(t))
		if o := w.runTask(t, "expire"); !strings.Contains(o.Reason, "retried") || !strings.Contains(o.Reason, " 0 failed again") {
			t.Errorf("run 2: %+v; want it to say it retried the failed deletes", o)
		}
	default:
		t.Fatalf("run 1: %v\nstdout:\n%s\nstderr:\n%s", st, run.stdout.String(), run.stderrText())
	}

	w.expectExpired(t, compacted, verified, inputs)
}
