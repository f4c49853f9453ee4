package compact

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// entryState is what a manifest entry says about one file.
type entryState struct {
	status        iceberg.ManifestEntryStatus
	snap, seq, fs int64
}

// entriesOf reads every entry of the manifests snap lists, by path.
func entriesOf(t *testing.T, tbl *table.Table, snap *table.Snapshot) map[string]entryState {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mans, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entryState{}
	for _, m := range mans {
		for e, err := range m.Entries(fs, false) {
			if err != nil {
				t.Fatal(err)
			}
			st := entryState{status: e.Status(), snap: e.SnapshotID(), seq: e.SequenceNum(), fs: -1}
			if p := e.FileSequenceNum(); p != nil {
				st.fs = *p
			}
			out[e.DataFile().FilePath()] = st
		}
	}
	return out
}

// The rewrite snapshot is written by the maintainer on v1 and v2 tables:
// the manifests that hold both rewritten and untouched files are rewritten
// with the untouched ones EXISTING, keeping the snapshot id and sequence
// numbers they had, and the rewritten ones DELETED with theirs; the summary
// counts the change.
func TestOwnCommitKeepsUntouchedEntries(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			ctx := context.Background()
			// Two commits of 4 files over 2 partitions: each manifest lists
			// files of both.
			opt := gen.Options{Appends: 8, RowsPerAppend: 40, Partitions: 2, Seed: 3, FormatVersion: version, FilesPerCommit: 4}
			cat, tbl, dir := testenv.GeneratedTable(t, opt)
			f := &fixture{cat: cat, tbl: tbl, opt: opt, dir: dir}
			f.rows, f.sum = checksum(t, tbl)
			before := entriesOf(t, tbl, tbl.CurrentSnapshot())

			cfg := testConfig()
			cfg.MinInputFiles = 2
			cfg.MaxFilesToRewrite = 4 // one partition of the two
			plan, err := PlanTable(ctx, tbl, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Groups) != 1 || plan.InputFiles() != 4 {
				t.Fatalf("plan %d groups of %d files, want 1 of 4", len(plan.Groups), plan.InputFiles())
			}
			fs, err := tbl.FS(ctx)
			if err != nil {
				t.Fatal(err)
			}
			e := &executor{cat: cat, fs: fs, plan: plan, current: tbl}
			if !e.ownCommit() {
				t.Fatal("the rewrite of this table would go through iceberg-go")
			}
			res, err := Execute(ctx, cat, tbl, plan, cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			after := f.reload(t)
			if rows, sum := checksum(t, after); rows != f.rows || sum != f.sum {
				t.Fatalf("rows %d sum %x after, %d %x before", rows, sum, f.rows, f.sum)
			}
			snap := after.CurrentSnapshot()
			rewritten := map[string]bool{}
			for _, tk := range plan.Groups[0].files.tasks() {
				rewritten[tk.File.FilePath()] = true
			}
			got := entriesOf(t, after, snap)
			for p, was := range before {
				now, ok := got[p]
				switch {
				case !ok:
					t.Fatalf("%s is not listed by the new snapshot", p)
				case rewritten[p]:
					want := entryState{status: iceberg.EntryStatusDELETED, snap: snap.SnapshotID, seq: was.seq, fs: was.fs}
					if now != want {
						t.Errorf("rewritten %s: %+v, want %+v", p, now, want)
					}
				default:
					want := was
					want.status = iceberg.EntryStatusEXISTING
					if now != want {
						t.Errorf("untouched %s: %+v, was %+v", p, now, was)
					}
				}
			}
			added := 0
			for p, now := range got {
				if _, old := before[p]; old {
					continue
				}
				added++
				wantSeq := int64(0)
				if version >= 2 {
					wantSeq = plan.SequenceNumber // later equality deletes still apply
				}
				if now.status != iceberg.EntryStatusADDED || now.snap != snap.SnapshotID || now.seq != wantSeq {
					t.Errorf("added %s: %+v, want ADDED by %d with data sequence number %d", p, now, snap.SnapshotID, wantSeq)
				}
			}
			props := snap.Summary.Properties
			want := map[string]string{
				"added-data-files":   fmt.Sprint(added),
				"deleted-data-files": "4",
				"total-data-files":   fmt.Sprint(8 - 4 + added),
				"total-records":      fmt.Sprint(f.rows),
				"added-records":      fmt.Sprint(res.RowsWritten),
				"deleted-records":    fmt.Sprint(res.RowsRead),
				"removed-files-size": fmt.Sprint(res.BytesRewritten),
				"added-files-size":   fmt.Sprint(res.BytesWritten),
				"maintainer.batch":   "1",
			}
			if version >= 2 {
				want["changed-partition-count"] = "1"
			}
			for k, v := range want {
				if props[k] != v {
					t.Errorf("summary %s = %q, want %q", k, props[k], v)
				}
			}
			if snap.Summary.Operation != table.OpReplace {
				t.Errorf("operation %s, want replace", snap.Summary.Operation)
			}
		})
	}
}

// A writer's equality delete committed after the plan, before the rewrite
// is built on the table that holds it, still applies to the rewritten rows:
// they keep the planned data sequence number.
func TestEqualityDeleteBeforeTheBuildStaysApplied(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 0)
	cfg := testConfig()
	cfg.RemoveDeadDeletes = false // the delete stays a file of its own
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	deleteEventIDs(t, f, gen.EventID(0, 0), gen.EventID(3, 1))
	fresh := f.reload(t)
	want, _ := checksum(t, fresh)
	if want != f.rows-2 {
		t.Fatalf("the writer's delete left %d rows of %d", want, f.rows)
	}
	res, err := Execute(ctx, f.cat, fresh, plan, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GroupsCommitted != 1 || res.CommitRetries != 0 {
		t.Fatalf("result %+v: want one group committed at once", res)
	}
	if rows, _ := checksum(t, f.reload(t)); rows != want {
		t.Fatalf("%d rows after compaction, %d after the writer's delete: deleted rows came back", rows, want)
	}
}

// lossyIO is a table's IO whose manifests of the rewrite lose their last
// bytes on the way out while the write reports success, as a store that
// acknowledged a truncated upload would.
type lossyIO struct {
	iceio.WriteFileIO
}

func (l lossyIO) Create(path string) (iceio.FileWriter, error) {
	w, err := l.WriteFileIO.Create(path)
	if err != nil || !strings.HasSuffix(path, "-m1.avro") {
		return w, err
	}
	return &lossyWriter{FileWriter: w}, nil
}

type lossyWriter struct {
	iceio.FileWriter
	n int
}

func (l *lossyWriter) Write(p []byte) (int, error) {
	l.n += len(p)
	if l.n > 64 {
		return len(p), nil // dropped
	}
	return l.FileWriter.Write(p)
}

// A manifest that does not read back to the entries written is never
// committed: the batch fails and the table is unchanged.
func TestManifestThatDoesNotReadBackIsNotCommitted(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 6, 50, 0)
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tbl := withIO(t, f.tbl, f.cat.(table.CatalogIO), func(fs iceio.WriteFileIO) iceio.IO { return lossyIO{fs} })
	before := f.tbl.CurrentSnapshot().SnapshotID
	res, err := Execute(ctx, f.cat, tbl, plan, cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "read back manifest") {
		t.Fatalf("err %v, want the manifest's read back to fail", err)
	}
	if res.GroupsCommitted != 0 || f.reload(t).CurrentSnapshot().SnapshotID != before {
		t.Fatalf("result %+v: a snapshot was committed", res)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("rows %d after, %d before", rows, f.rows)
	}
}
