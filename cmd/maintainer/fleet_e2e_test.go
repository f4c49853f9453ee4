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

// Three serve replicas over one catalog of 20 tables share one
// redis-server: each table is compacted once, by the replica rendezvous
// hashing gives it. One replica killed with SIGKILL as it starts compacting
// one of its tables hands its tables to the other two (its heartbeat and its
// lease expire after lock.ttl), which compact them with every row kept.
func TestFleetSharesTablesAndSurvivesAKill(t *testing.T) {
	t.Parallel()
	addr := redistest.Need(t)
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
	w := newGenWarehouseOf(t, sqliteCatalog, small, names[1:]...)
	bigOpt := gen.Options{Appends: 100, RowsPerAppend: 1000, Partitions: 20, Seed: 7}
	w.create(t, big, bigOpt)
	token := writeFile(t, filepath.Join(w.dir, "token"), serveToken+"\n")
	cfg, _ := w.redisConfig(t, addr, `server:
  listen: 127.0.0.1:0
  token_file: `+token+`
scheduler:
  poll_interval: 1s
  replica_id: REPLICA
metrics:
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
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.Replace(string(text), "  ttl: 60s\n", "  ttl: 3s\n", 1))
	procs := map[string]*serveProc{}
	for _, id := range ids {
		c := writeFile(t, filepath.Join(w.dir, id+".yaml"), strings.Replace(string(text), "replica_id: REPLICA", "replica_id: "+id, 1))
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
		return !slices.ContainsFunc(names[1:], func(name string) bool { return !w.state(t, name).compacted() })
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
	// The writer makes r3's big table due, and r3 is killed as soon as it
	// starts maintaining it; then the other tables become due.
	w.appendTo(t, big, bigOpt, 1)
	want[big] = w.state(t, big)
	r3 := procs["r3"]
	killedIn := genNamespace + "." + big
	started := `msg=maintaining table=` + killedIn
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(r3.proc.stderrText()[mark["r3"]:], started); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("r3 did not start maintaining %s in round 2:\n%s", big, r3.proc.stderrText()[mark["r3"]:])
		}
	}
	if err := r3.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, name := range names[1:] {
		w.appendTo(t, name, small, commitCount)
		want[name] = w.state(t, name)
	}
	_ = r3.proc.wait(t)
	midRun := compactions(r3, mark["r3"])[killedIn] == 0
	if !midRun {
		// The machine let r3 finish first: the handoff of its other tables
		// is still checked.
		t.Logf("r3 finished compacting %s before SIGKILL reached it", killedIn)
	} else {
		t.Logf("r3 killed while compacting %s", killedIn)
	}
	survivors := []string{"r1", "r2"}
	procs["r1"].waitFor("every table compacted after the kill", func() bool {
		return !slices.ContainsFunc(names, func(name string) bool { return !w.state(t, name).compacted() })
	})
	t.Logf("every table compacted %s after the kill (poll_interval 1s, lock.ttl 3s)", time.Since(killed).Round(100*time.Millisecond))
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
		if full == killedIn && midRun {
			heir := fleet.Owner(survivors, full)
			if got := compactions(procs[heir], mark[heir])[full]; got != 1 {
				t.Errorf("%s, which r3 was compacting when killed, was compacted %d times by its new owner %s; want 1", full, got, heir)
			}
		}
		if s := w.state(t, name); s.rows != want[name].rows || s.sum != want[name].sum {
			t.Errorf("%s after round 2: %d rows, checksum %x; want %d, %x", name, s.rows, s.sum, want[name].rows, want[name].sum)
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
