// Command upsertwriter is the writer of the "compaction beside a fast
// writer" try (issue 13, item 7): beside it, `maintainer run --task compact`
// runs again and again, and at the end the writer checks the table against
// its oracle. It works on a SQLite catalog in DIR (catalog.db, warehouse/),
// the layout of `maintainer demo`.
//
//	upsertwriter setup  -dir DIR -appends 1000 -rows 20 -partitions 4   # many single-file commits (a large metadata file)
//	upsertwriter write  -dir DIR -pause 0 &                             # one upsert per commit: a data file and an equality delete on event_id
//	maintainer run --config DIR/maintainer.yaml --task compact --force --output json   # repeat; read commit_retries
//	kill -TERM %1                                                       # the writer re-reads the table: ORACLE OK or the differences
//	upsertwriter probe  -dir DIR                                        # LoadTable and a metadata-only commit, timed
//
// Each commit's duration is logged; the SUMMARY line gives commits/s.
// rounds.sh runs two maintainer binaries beside it in paired rounds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
)

type row struct {
	t   arrow.Timestamp
	val string
}

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: upsertwriter setup|write|verify -dir DIR ...")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	dir := fs.String("dir", "", "warehouse folder (catalog.db, warehouse/)")
	appends := fs.Int("appends", 300, "setup: single-file appends")
	rows := fs.Int("rows", 50, "setup: rows per append")
	parts := fs.Int("partitions", 0, "setup: day partitions (0 unpartitioned)")
	expire := fs.Bool("expire", false, "setup: expire all snapshots but the last (manifests stay)")
	pause := fs.Duration("pause", 200*time.Millisecond, "write: pause between commits")
	dur := fs.Duration("duration", 0, "write: stop after this long (0: on SIGTERM/SIGINT only)")
	seed := fs.Int64("seed", 1, "write: row order seed")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	ctx := context.Background()
	cat, err := gen.OpenSQLiteCatalog(ctx, "default", filepath.Join(*dir, "catalog.db"), filepath.Join(*dir, "warehouse"))
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	ident := gen.Options{}.Identifier()
	switch mode {
	case "setup":
		start := time.Now()
		opt := gen.Options{Appends: *appends, RowsPerAppend: *rows, Partitions: *parts, Seed: 42}
		var tbl *table.Table
		if existing, lerr := cat.LoadTable(ctx, ident); lerr == nil {
			tbl, err = gen.Append(ctx, existing, opt, *appends, gen.NextAppendIndex(existing))
		} else {
			tbl, err = gen.Create(ctx, cat, opt)
		}
		if err != nil {
			log.Fatal(err)
		}
		if *expire {
			txn := tbl.NewTransaction()
			if err := txn.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0), table.WithPostCommit(false)); err != nil {
				log.Fatal(err)
			}
			if tbl, err = txn.Commit(ctx); err != nil {
				log.Fatal(err)
			}
		}
		tbl, _ = cat.LoadTable(ctx, ident)
		describe(tbl)
		log.Printf("setup done in %s", time.Since(start).Round(time.Millisecond))
	case "write":
		write(ctx, cat, ident, *pause, *dur, *seed)
	case "probe":
		for i := 0; i < 5; i++ {
			t0 := time.Now()
			tbl, err := cat.LoadTable(ctx, ident)
			if err != nil {
				log.Fatal(err)
			}
			l := time.Since(t0)
			t1 := time.Now()
			txn := tbl.NewTransaction()
			if err := txn.SetProperties(iceberg.Properties{"upsertwriter.probe": fmt.Sprint(i)}); err != nil {
				log.Fatal(err)
			}
			if _, err := txn.Commit(ctx); err != nil {
				log.Fatal(err)
			}
			log.Printf("probe %d: LoadTable %.1fms, metadata-only commit (SetProperties) %.1fms, %d snapshots", i, ms(l), ms(time.Since(t1)), len(tbl.Metadata().Snapshots()))
		}
	case "verify":
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			log.Fatal(err)
		}
		describe(tbl)
		live, dups, err := readLive(ctx, tbl, false)
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("live rows %d, duplicated ids %d", len(live), dups)
	default:
		log.Fatalf("unknown mode %q", mode)
	}
}

func describe(tbl *table.Table) {
	md := tbl.Metadata()
	st, _ := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	size := int64(-1)
	if st != nil {
		size = st.Size()
	}
	s := tbl.CurrentSnapshot()
	sum := map[string]string{}
	if s != nil && s.Summary != nil {
		sum = s.Summary.Properties
	}
	log.Printf("table: %d snapshots, metadata json %d bytes (%s), data files %s, delete files %s, records %s",
		len(md.Snapshots()), size, filepath.Base(tbl.MetadataLocation()), sum["total-data-files"], sum["total-delete-files"], sum["total-records"])
}

// readLive reads every live row; withTime also fills the event_time.
func readLive(ctx context.Context, tbl *table.Table, withTime bool) (map[int64]row, int, error) {
	res, err := tbl.Scan(table.WithSelectedFields(gen.ColEventID, gen.ColEventTime, gen.ColUserID, gen.ColSessionID)).ToArrowTable(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer res.Release()
	rdr := array.NewTableReader(res, 4096)
	defer rdr.Release()
	idx := func(name string) int {
		is := res.Schema().FieldIndices(name)
		if len(is) != 1 {
			log.Fatalf("column %s: %v", name, is)
		}
		return is[0]
	}
	ci, ct, cu, cs := idx(gen.ColEventID), idx(gen.ColEventTime), idx(gen.ColUserID), idx(gen.ColSessionID)
	out := map[int64]row{}
	dups := 0
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(ci).(*array.Int64)
		for i := range int(rec.NumRows()) {
			id := ids.Value(i)
			if _, dup := out[id]; dup {
				dups++
				log.Printf("DUP event_id %d is live twice (%s|%s)", id, rec.Column(cu).ValueStr(i), rec.Column(cs).ValueStr(i))
			}
			r := row{val: rec.Column(cu).ValueStr(i) + "|" + rec.Column(cs).ValueStr(i)}
			if withTime {
				r.t = rec.Column(ct).(*array.Timestamp).Value(i)
			}
			out[id] = r
		}
	}
	return out, dups, rdr.Err()
}

func write(ctx context.Context, cat *sqlcat.Catalog, ident table.Identifier, pause, dur time.Duration, seed int64) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		log.Fatal(err)
	}
	describe(tbl)
	oracle, dups, err := readLive(ctx, tbl, true)
	if err != nil || dups > 0 {
		log.Fatalf("initial read: %v, %d dups", err, dups)
	}
	ids := make([]int64, 0, len(oracle))
	for id := range oracle {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	rand.New(rand.NewSource(seed)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	log.Printf("writer: %d live rows, pause %s, duration %s", len(oracle), pause, dur)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var deadline <-chan time.Time
	if dur > 0 {
		deadline = time.After(dur)
	}
	base := time.Now().Unix() * 1000
	var commits, conflicts int
	var total time.Duration
	var failed error // the commit the writer stopped at
	begin := time.Now()
loop:
	for i := 0; ; i++ {
		if i > 0 && pause > 0 {
			select {
			case <-stop:
				break loop
			case <-deadline:
				break loop
			case <-time.After(pause):
			}
		} else {
			select {
			case <-stop:
				break loop
			case <-deadline:
				break loop
			default:
			}
		}
		id := ids[i%len(ids)]
		version := base + int64(i)
		t0 := time.Now()
		attempts, loadDur, err := upsert(ctx, cat, ident, id, oracle[id].t, version)
		d := time.Since(t0)
		if err != nil {
			failed = fmt.Errorf("commit %d failed after %s, %d attempts: %w", i, d, attempts, err)
			log.Printf("commit %d FAILED after %s, %d attempts: %v", i, d, attempts, err)
			break
		}
		oracle[id] = row{t: oracle[id].t, val: fmt.Sprintf("%d|v%d", version, version)}
		commits++
		conflicts += attempts - 1
		total += d
		log.Printf("commit %d ok %.1fms attempts %d load %.1fms id %d", i, ms(d), attempts, ms(loadDur), id)
	}
	elapsed := time.Since(begin)
	mean := time.Duration(0)
	if commits > 0 {
		mean = total / time.Duration(commits)
	}
	log.Printf("SUMMARY writer: %d commits in %s = %.2f commits/s, mean commit %.1fms, %d conflicts (re-commits), pause %s",
		commits, elapsed.Round(time.Millisecond), float64(commits)/elapsed.Seconds(), ms(mean), conflicts, pause)

	tbl, err = cat.LoadTable(ctx, ident)
	if err != nil {
		log.Fatal(err)
	}
	describe(tbl)
	live, dups, err := readLive(ctx, tbl, false)
	if err != nil {
		log.Fatalf("final read: %v", err)
	}
	var diff []string
	for id, w := range oracle {
		if g, ok := live[id]; !ok {
			diff = append(diff, fmt.Sprintf("%d lost (%s)", id, w.val))
		} else if g.val != w.val {
			diff = append(diff, fmt.Sprintf("%d is %s, want %s", id, g.val, w.val))
		}
	}
	for id, g := range live {
		if _, ok := oracle[id]; !ok {
			diff = append(diff, fmt.Sprintf("%d appeared (%s)", id, g.val))
		}
	}
	if len(diff) == 0 && dups == 0 {
		log.Printf("ORACLE OK: %d live rows, each exactly once, each at the writer's version", len(live))
		if failed != nil {
			// A commit that did not say whether it landed leaves the
			// oracle unsure of that row; either way the run failed.
			log.Fatalf("FAILED: the writer stopped early: %v", failed)
		}
		return
	}
	n := len(diff)
	if len(diff) > 20 {
		diff = diff[:20]
	}
	log.Printf("ORACLE MISMATCH: %d live rows, want %d; %d duplicated; %d differences: %s", len(live), len(oracle), dups, n, strings.Join(diff, "; "))
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// upsert commits a new version of row id (a data file) and an equality
// delete of its old version on event_id (with event_time when partitioned).
func upsert(ctx context.Context, cat *sqlcat.Catalog, ident table.Identifier, id int64, ts arrow.Timestamp, version int64) (int, time.Duration, error) {
	l0 := time.Now()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return 0, 0, err
	}
	loadDur := time.Since(l0)
	ids, times := []int64{id}, []arrow.Timestamp{ts}
	data, dels, err := gen.WriteUpsert(ctx, tbl, ids, times, version, ids, times)
	if err != nil {
		return 0, loadDur, err
	}
	attempts, err := gen.CommitRowDelta(ctx, tbl, func() (*table.Table, error) { return cat.LoadTable(ctx, ident) }, data, dels)
	return attempts, loadDur, err
}
