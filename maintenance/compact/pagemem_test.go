package compact

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

func TestPageBuffersRecycleZeroed(t *testing.T) {
	var p pageBuffers
	b := p.Allocate(16384)
	if len(b) != 16384 || cap(b) != 16384 {
		t.Fatalf("len %d cap %d, want 16384", len(b), cap(b))
	}
	for i := range b {
		b[i] = 0xA5
	}
	p.Free(b)
	// A sync.Pool may drop what it holds; try until it hands one back.
	for i := 0; ; i++ {
		c := p.Allocate(10000)
		if len(c) != 10000 {
			t.Fatalf("len %d, want 10000", len(c))
		}
		if !bytes.Equal(c[:cap(c)], make([]byte, cap(c))) {
			t.Fatal("a recycled buffer is not zeroed")
		}
		if p.made.Load() == 1 || i == 100 {
			break
		}
		p.Free(c)
	}
	// Growing leaves the old buffer alone: a page may still point into it.
	old := p.Allocate(5000)
	old[0] = 7
	grown := p.Reallocate(20000, old)
	if grown[0] != 7 || old[0] != 7 || cap(grown) != 32768 {
		t.Fatalf("grown %d old %d cap %d", grown[0], old[0], cap(grown))
	}
	// A buffer not of a class's size is not kept.
	made := p.made.Load()
	p.Free(make([]byte, 100))
	p.Free(make([]byte, 20000, 20000))
	if got := p.Allocate(20000); cap(got) != 32768 || p.made.Load() != made+1 {
		t.Fatalf("cap %d made %d, want a new buffer of 32768", cap(got), p.made.Load()-made)
	}
	// Nor one past the largest class.
	if got := p.Allocate(9 << 20); cap(got) != 9<<20 {
		t.Fatalf("cap %d, want %d", cap(got), 9<<20)
	}
}

// Copy mode hands the page readers' buffers of each finished input file to
// the next files: a group of many small files makes a few sets of them,
// not one per file and column. The rows stay the same (a reader that kept
// a buffer past its close would read zeros).
func TestCopyModeRecyclesPageBuffers(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 60, 200, 1)
	cfg := testConfig()
	plan, err := PlanTable(ctx, f.reload(t), cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var env *pathEnv
	capture := func(e *pathEnv) rewriter { env = e; return copyPath(0)(e) }
	var log pathLog
	if _, err := execute(ctx, f.cat, f.reload(t), plan, cfg, guarded(t, Options{}), log.watch([]rewritePath{capture})); err != nil {
		t.Fatal(err)
	}
	if got := log.all(); len(got) != 1 || got[0] != "copy" {
		t.Fatalf("paths %v (why %v), want copy", got, log.whys)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("%d rows checksum %x after, %d rows %x before", rows, sum, f.rows, f.sum)
	}
	d, _ := env.directTable()
	cols := d.out.parquet.NumColumns()
	made := d.pages.made.Load()
	t.Logf("%d files of %d columns: %d page buffers made", 60, cols, made)
	if made == 0 || made > int64(cols*3*readAhead*2) {
		t.Fatalf("%d page buffers made for 60 files of %d columns, want a few sets (at most %d)", made, cols, cols*3*readAhead*2)
	}
}

// Inputs of many row groups, whose buffers are recycled from file to file:
// copy mode moves from chunk to chunk within a file and closes the readers
// only once the file is done; every value comes out the same.
func TestCopyModeOverManyRowGroupsKeepsEveryValue(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 24, 1500, 1)
	setProps(t, f, map[string]string{table.ParquetRowGroupLimitKey: "100"})
	first := testConfig()
	first.TargetFileSize = MinTargetFileSize
	compactAll(t, f, first, []rewritePath{scanPath})
	tbl := f.reload(t)
	inputs := liveDataFiles(t, tbl)
	for _, df := range inputs {
		if n := len(rowGroupBytes(t, df.FilePath())); n < 10 {
			t.Fatalf("%s has %d row groups, want many", df.FilePath(), n)
		}
	}
	if len(inputs) < 2 {
		t.Fatalf("%d input files, want several", len(inputs))
	}
	cfg := testConfig()
	cfg.RewriteAll = true
	plan, err := PlanTable(ctx, tbl, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var log pathLog
	if _, err := execute(ctx, f.cat, tbl, plan, cfg, guarded(t, Options{}), log.watch([]rewritePath{copyPath(0)})); err != nil {
		t.Fatal(err)
	}
	if got := log.all(); len(got) == 0 || got[0] != "copy" {
		t.Fatalf("paths %v (why %v), want copy", got, log.whys)
	}
	if rows, sum := checksum(t, f.reload(t)); rows != f.rows || sum != f.sum {
		t.Fatalf("%d rows checksum %x after, %d rows %x before", rows, sum, f.rows, f.sum)
	}
}
