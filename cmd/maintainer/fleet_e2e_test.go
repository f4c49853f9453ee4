package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
	"github.com/iceberg-maintainer/maintainer/internal/s3test"
)

// fleetStatus is the fleet part of GET /v1/status.
type fleetStatus struct {
	Replica     string   `json:"replica"`
	Members     []string `json:"members"`
	OwnedTables int      `json:"owned_tables"`
	Valid       bool     `json:"valid"`
}

// create makes table name with opt, as newGenWarehouseOf does.
func (w *genWarehouse) create(t *testing.T, name string, opt gen.Options) {
	t.Helper()
	cat, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	opt.Namespace, opt.Table = genNamespace, name
	if _, err := gen.Create(t.Context(), cat, opt); err != nil {
		t.Fatalf("generate %s: %v", name, err)
	}
}

// appendTo commits k appends of opt to table name, as a writer would.
func (w *genWarehouse) appendTo(t testing.TB, name string, opt gen.Options, k int) {
	t.Helper()
	ctx := context.Background()
	cat, err := w.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, table.Identifier{genNamespace, name})
	if err != nil {
		t.Fatal(err)
	}
	opt.Namespace, opt.Table = genNamespace, name
	if _, err := gen.Append(ctx, tbl, opt, k, gen.NextAppendIndex(tbl)); err != nil {
		t.Fatalf("append to %s: %v", name, err)
	}
}

// compactedNow says whether the table's current snapshot is a compaction,
// from its metadata alone (w.state reads every row).
func (w *genWarehouse) compactedNow(t *testing.T, name string) (yes bool) {
	t.Helper()
	w.withTable(t, name, func(tbl *table.Table) {
		cur := tbl.CurrentSnapshot()
		yes = cur != nil && cur.Summary != nil && cur.Summary.Properties["maintainer.operation"] == "compact"
	})
	return yes
}

// fleetConfig is the text of the warehouse's Redis config for serve
// replicas: the API on a free port with the test token, a 1s poll, the
// given replica_id, lock.ttl 3s (tables change hands within seconds), and
// extra YAML.
func (w *genWarehouse) fleetConfig(t *testing.T, addr, replicaID, extra string) string {
	t.Helper()
	token := writeFile(t, filepath.Join(w.dir, "token"), serveToken+"\n")
	cfg, _ := w.redisConfig(t, addr, "server:\n  listen: 127.0.0.1:0\n  token_file: "+token+
		"\nscheduler:\n  poll_interval: 1s\n  replica_id: "+replicaID+"\n"+extra)
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(text), "  ttl: 60s\n", "  ttl: 3s\n", 1)
	if out == string(text) {
		t.Fatalf("no lock.ttl to shorten in:\n%s", text)
	}
	return out
}

func (p *serveProc) fleet() fleetStatus {
	p.t.Helper()
	_, body := p.api("GET", "/v1/status", serveToken, "")
	var st struct {
		Fleet *fleetStatus `json:"fleet"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Fleet == nil {
		p.t.Fatalf("status without a fleet (%v):\n%s", err, body)
	}
	return *st.Fleet
}

var compactDone = regexp.MustCompile(`msg="task done" table=(\S+) task=compact status=succeeded`)

// compactions counts the successful compactions in a replica's log from
// byte offset from on, by table.
func compactions(p *serveProc, from int) map[string]int {
	out := map[string]int{}
	for _, m := range compactDone.FindAllStringSubmatch(p.proc.stderrText()[from:], -1) {
		out[m[1]]++
	}
	return out
}

// Three serve replicas over one catalog of 20 tables (their files on the
// in-process S3 server) share one redis-server: each table is compacted
// once, by the replica rendezvous hashing gives it. One replica is killed
// with SIGKILL in the middle of compacting one of its tables: its first
// group's file written, its second group's write held by the S3 server
// until the kill. It hands its tables to the other two (its heartbeat and
// its lease expire after lock.ttl), which compact them with every row kept,
// each file replaced once, and the killed replica's file left unreferenced
// for the orphan pass.
func TestFleetSharesTablesAndSurvivesAKill(t *testing.T) {
	t.Parallel()
	addr := redistest.Need(t)
	srv := s3test.Start(t, fleetBucket)
	ids := []string{"r1", "r2", "r3"}
	// 19 small tables: 15 commits, 5 files in each of 3 partitions, below
	// commit_count (16) until the writer adds one. And a bigger one of
	// r3's, which r3 is killed while compacting in round 2: 100 commits, 5
	// files in each of 20 partitions (one group at a time leaves time
	// between a compaction's first group and its commit), below its
	// commit_count (101) until then.
	const n, created, commitCount = 20, 15, 16
	big := "big0"
	for i := 1; fleet.Owner(ids, genNamespace+"."+big) != "r3"; i++ {
		big = fmt.Sprintf("big%d", i)
	}
	names := []string{big}
	for i := range n - 1 {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	small := gen.Options{Appends: created, RowsPerAppend: 200, Partitions: 3, Seed: 7}
	w := newGenWarehouseOf(t, s3Catalog(srv), small, names[1:]...)
	bigOpt := gen.Options{Appends: 100, RowsPerAppend: 1000, Partitions: 20, Seed: 7}
	w.create(t, big, bigOpt)
	text := w.fleetConfig(t, addr, "REPLICA", `metrics:
  health_interval: 1s
tables:
  - match: "demo.*"
    compact:
      max_concurrent_groups: 1
      trigger: {commit_count: `+fmt.Sprint(commitCount)+`, interval: 0s, rate_limit: 0s}
    expire: {enabled: false}
    orphans: {enabled: false}
  - match: "demo.big*"
    compact:
      trigger: {commit_count: 101}
`)
	procs := map[string]*serveProc{}
	for _, id := range ids {
		c := writeFile(t, filepath.Join(w.dir, id+".yaml"), strings.Replace(text, "replica_id: REPLICA", "replica_id: "+id, 1))
		procs[id] = startServe(t, w, c)
	}
	for _, id := range ids {
		procs[id].waitFor(id+" sees 3 members", func() bool { return len(procs[id].fleet().Members) == 3 })
	}
	owned := 0
	for _, id := range ids {
		f := procs[id].fleet()
		if f.Replica != id || !f.Valid {
			t.Errorf("%s: fleet status %+v", id, f)
		}
		owned += f.OwnedTables
	}
	if owned != n {
		t.Fatalf("the replicas own %d tables in all; want %d", owned, n)
	}

	// Round 1: the writer makes every table due.
	for _, name := range names[1:] {
		w.appendTo(t, name, small, commitCount-created)
	}
	want := map[string]tableState{}
	for _, name := range names {
		want[name] = w.state(t, name)
	}
	procs["r1"].waitFor("every small table compacted", func() bool {
		return !slices.ContainsFunc(names[1:], func(name string) bool { return !w.compactedNow(t, name) })
	})
	for _, name := range names[1:] {
		full := genNamespace + "." + name
		owner := fleet.Owner(ids, full)
		for _, id := range ids {
			got, wantN := compactions(procs[id], 0)[full], 0
			if id == owner {
				wantN = 1
			}
			if got != wantN {
				t.Errorf("%s compacted %s %d times; want %d (its owner is %s)", id, full, got, wantN, owner)
			}
		}
		if s := w.state(t, name); s.rows != want[name].rows || s.sum != want[name].sum {
			t.Errorf("%s after round 1: %d rows, checksum %x; want %d, %x", name, s.rows, s.sum, want[name].rows, want[name].sum)
		}
	}

	// Round 2: r3 is killed in the middle of compacting one of its tables.
	mark := map[string]int{}
	for _, id := range ids {
		mark[id] = len(procs[id].proc.stderrText())
	}
	// The writer makes r3's big table due. Only r3 owns it while it lives,
	// so the data files written under the table are r3's compaction's: the
	// first (its first group's) is let through, the second is held until r3
	// has been killed. Then the other tables become due.
	stall := stallWrites(srv, "/wh/"+genNamespace+".db/"+big+"/data/", 1)
	w.appendTo(t, big, bigOpt, 1)
	want[big] = w.state(t, big)
	r3 := procs["r3"]
	killedIn := genNamespace + "." + big
	select {
	case <-stall.Stalled:
	case <-time.After(5 * time.Minute):
		t.Fatalf("r3 wrote no second file of %s in round 2:\n%s", big, r3.proc.stderrText()[mark["r3"]:])
	}
	if err := r3.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = r3.proc.wait(t)
	written, held := stall.release()
	if got := compactions(r3, mark["r3"])[killedIn]; got != 0 || !strings.Contains(r3.proc.stderrText()[mark["r3"]:], "msg=maintaining table="+killedIn) {
		t.Fatalf("r3 was not killed mid-compaction of %s (%d compactions done):\n%s", killedIn, got, r3.proc.stderrText()[mark["r3"]:])
	}
	if s := w.state(t, big); s.snapshotID != want[big].snapshotID {
		t.Fatalf("%s changed while r3's write was held: snapshot %d -> %d (%q)", big, want[big].snapshotID, s.snapshotID, s.operation)
	}
	t.Logf("r3 killed while compacting %s: it had written %v, its write of %s was held", killedIn, written, held)
	// r3's small tables become due now that it is dead (the others' own
	// tables would show nothing about the handoff).
	var orphaned []string
	for _, name := range names[1:] {
		if fleet.Owner(ids, genNamespace+"."+name) == "r3" {
			orphaned = append(orphaned, name)
			w.appendTo(t, name, small, commitCount)
			want[name] = w.state(t, name)
		}
	}
	if len(orphaned) == 0 {
		t.Fatal("r3 owns no small table: the handoff of its tables is not tested")
	}
	survivors := []string{"r1", "r2"}
	heir := fleet.Owner(survivors, killedIn)
	// The heir takes the table once r3's heartbeat and lease ran out:
	// within lock.ttl (3s) after the kill, plus its next heartbeat round
	// (lock.ttl/3, 1s) and poll (poll_interval, 1s): 5s. The bound below
	// leaves 10s more for a machine shared with other tests.
	const takeover, slack = 5 * time.Second, 10 * time.Second
	// Measured from the heir's log line (the writer above takes a while).
	startedRE := regexp.MustCompile(`(?m)^time=(\S+) level=INFO msg=maintaining table=` + regexp.QuoteMeta(killedIn) + ` `)
	var line []string
	procs[heir].waitFor(heir+" maintains "+killedIn, func() bool {
		line = startedRE.FindStringSubmatch(procs[heir].proc.stderrText()[mark[heir]:])
		return line != nil
	})
	at, err := time.Parse(time.RFC3339Nano, line[1])
	if err != nil {
		t.Fatal(err)
	}
	took := at.Sub(killed)
	t.Logf("%s took %s %s after the kill (expected within %s: lock.ttl 3s + lock.ttl/3 + poll_interval 1s)", heir, killedIn, took.Round(100*time.Millisecond), takeover)
	if took > takeover+slack {
		t.Errorf("%s took %s %s after the kill; want within about %s", heir, killedIn, took.Round(100*time.Millisecond), takeover)
	}
	procs["r1"].waitFor("every table compacted after the kill", func() bool {
		return !slices.ContainsFunc(names, func(name string) bool { return !w.compactedNow(t, name) })
	})
	t.Logf("r3's tables (%s and %d small ones) compacted by the survivors %s after the kill", big, len(orphaned), time.Since(killed).Round(100*time.Millisecond))
	for _, id := range survivors {
		if f := procs[id].fleet(); !slices.Equal(f.Members, survivors) {
			t.Errorf("%s sees members %v after the kill; want %v", id, f.Members, survivors)
		}
	}
	owned = 0
	for _, id := range survivors {
		owned += procs[id].fleet().OwnedTables
	}
	if owned != n {
		t.Errorf("the survivors own %d tables; want %d", owned, n)
	}
	for _, name := range names {
		full := genNamespace + "." + name
		total := 0
		for _, id := range ids {
			total += compactions(procs[id], mark[id])[full]
		}
		if total > 1 {
			t.Errorf("%s compacted %d times in round 2; want once", full, total)
		}
		if full == killedIn {
			if got := compactions(procs[heir], mark[heir])[full]; got != 1 {
				t.Errorf("%s, which r3 was compacting when killed, was compacted %d times by its new owner %s; want 1", full, got, heir)
			}
		}
		s := w.state(t, name)
		if s.rows != want[name].rows || s.sum != want[name].sum {
			t.Errorf("%s after round 2: %d rows, checksum %x; want %d, %x", name, s.rows, s.sum, want[name].rows, want[name].sum)
		}
		h := historyOf(t, w, name)
		expectEachFileOnce(t, srv, name, h)
		rounds := 1 // round 1 for the small tables, round 2 for big
		if slices.Contains(orphaned, name) {
			rounds = 2
		}
		if h.commits != rounds {
			t.Errorf("%s: %d compaction commits; want %d, one a round it was due in", name, h.commits, rounds)
		}
		if name == big {
			if v := verifyS3(t, srv, s.metadata); v.LiveRows != s.rows {
				t.Errorf("%s: the verifier reads %d rows; want %d", name, v.LiveRows, s.rows)
			}
			// r3's written file is nobody's: left for the orphan pass.
			keys := srv.Keys(t, fleetBucket)
			for _, key := range written {
				if !keys[key] || h.referenced["s3://"+fleetBucket+"/"+key] {
					t.Errorf("r3's file %s: in the bucket %v, referenced %v; want left there, unreferenced", key, keys[key], h.referenced["s3://"+fleetBucket+"/"+key])
				}
			}
			if keys[held] || h.referenced["s3://"+fleetBucket+"/"+held] {
				t.Errorf("r3's held write %s reached the bucket or the table", held)
			}
		}
	}
	code, metricsText := procs["r1"].api("GET", "/metrics", "", "")
	if code != 200 || !strings.Contains(metricsText, "iceberg_maintainer_fleet_members 2") {
		t.Errorf("r1 /metrics lacks fleet_members 2:\n%s", grepLines(metricsText, "iceberg_maintainer_fleet"))
	}
	for _, id := range survivors {
		procs[id].stop()
	}
}

// Two serve processes given one scheduler.replica_id: each finds the
// other's heartbeat of the id, logs an error, counts it, and fails the
// fleet check of /readyz naming the id; both keep serving (the tables'
// leases keep them apart).
func TestFleetSharedReplicaIDFailsReadiness(t *testing.T) {
	t.Parallel()
	addr := redistest.Need(t)
	w := newGenWarehouseOf(t, sqliteCatalog, gen.Options{Appends: 3, RowsPerAppend: 10, Partitions: 1, Seed: 5}, "events")
	cfg := writeFile(t, filepath.Join(w.dir, "twin.yaml"), w.fleetConfig(t, addr, "twin", ""))
	procs := []*serveProc{startServe(t, w, cfg), startServe(t, w, cfg)}
	for i, p := range procs {
		p.waitFor(fmt.Sprintf("process %d not ready for the shared id", i), func() bool {
			code, body := p.api("GET", "/readyz", "", "")
			return code == 503 && strings.Contains(body, "replica id twin is heartbeated by another process too")
		})
		if !strings.Contains(p.proc.stderrText(), `level=ERROR msg="another process heartbeats this replica's id`) {
			t.Errorf("process %d logged no error for the shared id:\n%s", i, p.proc.stderrText())
		}
		_, m := p.api("GET", "/metrics", "", "")
		if !regexp.MustCompile(`(?m)^iceberg_maintainer_fleet_replica_id_conflicts_total [1-9]`).MatchString(m) {
			t.Errorf("process %d: %s", i, grepLines(m, "replica_id_conflicts"))
		}
		if f := p.fleet(); f.Replica != "twin" || !f.Valid || len(f.Members) != 1 {
			t.Errorf("process %d: fleet %+v; want the one member twin, valid", i, f)
		}
	}
	for _, p := range procs {
		p.stop()
	}
}
