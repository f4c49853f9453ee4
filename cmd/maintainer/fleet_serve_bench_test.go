package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/fleet"
	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/redistest"
)

// BenchmarkFleetServe runs FLEET_SERVE_REPLICAS (default 4) `serve`
// replicas over FLEET_SERVE_TABLES (default 1,000) small tables of one
// SQLite catalog, sharing one redis-server (MAINTAINER_TEST_REDIS_ADDR, or
// a throw-away one). It reports the tables each replica owns, the CPU of a
// poll on each replica against one replica alone over the same tables
// (polls after the first, which also measures health), and, once a writer
// commit makes every table's compaction due, how many tables were compacted,
// how many twice (want 0) and how many by a replica that was not their
// owner (want 0).
//
//	FLEET_SERVE_TABLES=1000 go test -run '^$' -bench FleetServe -benchtime 1x -timeout 0 ./cmd/maintainer/
//
// FLEET_SERVE_WINDOW (default 60s) is how long poll CPU is measured.
func BenchmarkFleetServe(b *testing.B) {
	n, replicas := envInt(b, "FLEET_SERVE_TABLES", 1000), envInt(b, "FLEET_SERVE_REPLICAS", 4)
	window := time.Minute
	if s := os.Getenv("FLEET_SERVE_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("FLEET_SERVE_WINDOW=%q: %v", s, err)
		}
		window = d
	}
	addr := redistest.Need(b)
	dir := b.TempDir()
	base := fleetWarehouse(b, dir, n)
	text, err := os.ReadFile(base)
	if err != nil {
		b.Fatal(err)
	}
	cfgText := string(text)
	if i := strings.Index(cfgText, "\nscheduler:\n"); i >= 0 {
		cfgText = cfgText[:i+1]
	}
	prefix := fmt.Sprintf("bench-fleet-%d", time.Now().UnixNano())
	cfgText = strings.Replace(cfgText, "lock:\n  backend: local\n",
		"lock:\n  backend: redis\n  redis:\n    addrs: [\""+addr+"\"]\n    key_prefix: "+prefix+"\n", 1)
	// 6 commits a table: compaction is due at the 7th.
	cfgText += `server:
  listen: 127.0.0.1:0
scheduler:
  poll_interval: 10s
  replica_id: REPLICA
metrics:
  health_interval: 1h
  max_tables: 5000
tables:
  - match: "demo.*"
    compact:
      trigger: {commit_count: 7, interval: 0s, rate_limit: 0s}
    expire: {enabled: false}
    orphans: {enabled: false}
`
	config := func(id string) string {
		p := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(p, []byte(strings.Replace(cfgText, "replica_id: REPLICA", "replica_id: "+id, 1)), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	for b.Loop() {
		// One replica alone.
		alone := startBenchServe(b, dir, config("alone"))
		alone.waitPolls(b, 2) // the first, which measured every table's health, is over
		aloneCPU := alone.pollCPU(b, window)
		alone.stop(b)
		b.Logf("1 replica alone, %d tables: %.0f cpu-ms a poll", n, aloneCPU)
		b.ReportMetric(aloneCPU, "alone-cpu-ms/poll")

		ids := make([]string, replicas)
		procs := make([]*benchServe, replicas)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d", i+1)
			procs[i] = startBenchServe(b, dir, config(ids[i]))
		}
		for _, p := range procs {
			p.waitFor(b, "every member", func() bool { return len(p.fleet(b).Members) == replicas })
		}
		for _, p := range procs {
			// Past the poll that measured the tables it took when the
			// last member joined.
			p.waitPolls(b, p.polls(b)+2)
		}
		var wg sync.WaitGroup
		cpu := make([]float64, replicas)
		for i, p := range procs {
			wg.Go(func() { cpu[i] = p.pollCPU(b, window) })
		}
		wg.Wait()
		for i, p := range procs {
			f := p.fleet(b)
			b.Logf("%s: owns %d of %d tables, %.0f cpu-ms a poll (%.2fx alone)", ids[i], f.OwnedTables, n, cpu[i], cpu[i]/aloneCPU)
		}
		b.ReportMetric(cpu[0], "r1-cpu-ms/poll")

		// A writer commit makes every table's compaction due.
		start := time.Now()
		open, _ := sqliteCatalog(nil, dir)
		w := &genWarehouse{dir: dir, open: open}
		for i := range n {
			w.appendTo(b, fmt.Sprintf("t%04d", i), gen.Options{RowsPerAppend: 50, Partitions: 1, Seed: int64(i)}, 1)
		}
		b.Logf("appended to %d tables in %s", n, time.Since(start).Round(time.Second))
		done := func() map[string][]string {
			by := map[string][]string{}
			for i, p := range procs {
				for _, m := range compactDone.FindAllStringSubmatch(p.stderrText(), -1) {
					by[m[1]] = append(by[m[1]], ids[i])
				}
			}
			return by
		}
		procs[0].waitForUpTo(b, "every table compacted", 30*time.Minute, func() bool { return len(done()) == n })
		b.Logf("every table compacted %s after the first append", time.Since(start).Round(time.Second))
		twice, strangers := 0, 0
		runs := make(map[string]int, replicas)
		for tbl, by := range done() {
			if len(by) > 1 {
				twice++
			}
			if by[0] != fleet.Owner(ids, tbl) {
				strangers++
			}
			for _, id := range by {
				runs[id]++
			}
		}
		for i, p := range procs {
			b.Logf("%s: compacted %d tables, lease busy %d times", ids[i], runs[ids[i]], p.counter(b, `iceberg_maintainer_lock_acquisitions_total{result="busy"}`))
		}
		b.Logf("tables compacted twice: %d; compacted by a replica that does not own them: %d", twice, strangers)
		b.ReportMetric(float64(twice), "compacted-twice")
		if twice > 0 || strangers > 0 {
			b.Errorf("%d tables compacted twice, %d by a replica other than their owner", twice, strangers)
		}
		for _, p := range procs {
			p.stop(b)
		}
	}
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

// benchServe is a serve process of the benchmark, its stderr kept.
type benchServe struct {
	cmd  *exec.Cmd
	base string
	mu   sync.Mutex
	err  strings.Builder
	eof  chan struct{}
}

func startBenchServe(b *testing.B, dir, cfg string) *benchServe {
	b.Helper()
	p := &benchServe{eof: make(chan struct{})}
	p.cmd = exec.Command(binPath, "serve", "--config", cfg)
	p.cmd.Dir, p.cmd.Env = dir, maintainerEnv()
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.cmd.Process.Kill() })
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.err.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	p.waitFor(b, "listening", func() bool {
		if m := listening.FindStringSubmatch(p.stderrText()); m != nil {
			p.base = "http://" + m[1]
			return true
		}
		return false
	})
	return p
}

func (p *benchServe) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err.String()
}

func (p *benchServe) waitFor(b *testing.B, what string, ok func() bool) {
	b.Helper()
	p.waitForUpTo(b, what, 10*time.Minute, ok)
}

func (p *benchServe) waitForUpTo(b *testing.B, what string, limit time.Duration, ok func() bool) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		select {
		case <-p.eof:
			b.Fatalf("serve ended before %s:\n%s", what, p.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("gave up waiting for %s:\n%s", what, p.stderrText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *benchServe) get(b *testing.B, path string) string {
	b.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func (p *benchServe) fleet(b *testing.B) fleetStatus {
	b.Helper()
	var st struct {
		Fleet fleetStatus `json:"fleet"`
	}
	if err := json.Unmarshal([]byte(p.get(b, "/v1/status")), &st); err != nil {
		b.Fatal(err)
	}
	return st.Fleet
}

// counter reads one series of /metrics (0 when absent).
func (p *benchServe) counter(b *testing.B, series string) int {
	b.Helper()
	for l := range strings.SplitSeq(p.get(b, "/metrics"), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return 0
}

func (p *benchServe) polls(b *testing.B) int {
	return p.counter(b, `iceberg_maintainer_polls_total{result="success"}`)
}

func (p *benchServe) waitPolls(b *testing.B, k int) {
	b.Helper()
	p.waitFor(b, fmt.Sprintf("%d polls", k), func() bool { return p.polls(b) >= k })
}

// pollCPU is the process's CPU per poll, in ms, over the polls that end
// within window (at least one).
func (p *benchServe) pollCPU(b *testing.B, window time.Duration) float64 {
	b.Helper()
	polls0, cpu0 := p.polls(b), procCPU(b, p.cmd.Process.Pid)
	time.Sleep(window)
	p.waitPolls(b, polls0+1)
	polls1, cpu1 := p.polls(b), procCPU(b, p.cmd.Process.Pid)
	return float64((cpu1 - cpu0).Milliseconds()) / float64(polls1-polls0)
}

// procCPU is a process's user plus system CPU so far, from /proc.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): utime and stime are the 12th and 13th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

func (p *benchServe) stop(b *testing.B) {
	b.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.eof
	_ = p.cmd.Wait()
}
