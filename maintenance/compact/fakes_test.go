package compact

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/iceberg-maintainer/maintainer/internal/metacommit"
	"github.com/iceberg-maintainer/maintainer/internal/sqlcatalog"
	"github.com/iceberg-maintainer/maintainer/internal/sqliteuri"
)

// Test fakes: each wraps a real part of compaction (a path, the table's IO,
// its catalog) to watch it or to make it fail.

// wrapPaths wraps the rewriter of each path: wrap gets the path's name and
// its real rewrite, and does what the test needs around it.
func wrapPaths(paths []rewritePath, wrap func(name string, in *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error)) []rewritePath {
	out := make([]rewritePath, len(paths))
	for i, p := range paths {
		out[i] = func(env *pathEnv) rewriter { return &wrappedRewriter{real: p(env), wrap: wrap} }
	}
	return out
}

type wrappedRewriter struct {
	real rewriter
	wrap func(name string, in *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error)
}

func (w *wrappedRewriter) name() string { return w.real.name() }

func (w *wrappedRewriter) rewrite(ctx context.Context, in *groupInput) ([]iceberg.DataFile, int64, error) {
	return w.wrap(w.real.name(), in, func() ([]iceberg.DataFile, int64, error) { return w.real.rewrite(ctx, in) })
}

func isDeclined(err error) bool {
	var d *declined
	return errors.As(err, &d)
}

// pathLog records which path took each group, and why the paths before it
// declined.
type pathLog struct {
	mu    sync.Mutex
	paths []string // one per group
	whys  []string
}

// watch returns paths that record into l.
func (l *pathLog) watch(paths []rewritePath) []rewritePath {
	return wrapPaths(paths, func(name string, _ *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		files, rows, err := rewrite()
		l.mu.Lock()
		defer l.mu.Unlock()
		if d := (*declined)(nil); errors.As(err, &d) {
			l.whys = append(l.whys, d.why)
		} else {
			l.paths = append(l.paths, name)
		}
		return files, rows, err
	})
}

func (l *pathLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

// losingBatch is paths whose rewriter loses a batch of lost rows between
// reader and writer, as a buggy writer would: its files hold that many rows
// fewer than it read.
func losingBatch(paths []rewritePath, lost int64) []rewritePath {
	return wrapPaths(paths, func(_ string, _ *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		files, rows, err := rewrite()
		if err == nil {
			rows += lost
		}
		return files, rows, err
	})
}

// cancelAfterRewrite is paths that cancel the run with cause once a path
// has rewritten a group, as a lease lost before the commit.
func cancelAfterRewrite(paths []rewritePath, cancel context.CancelCauseFunc, cause error) []rewritePath {
	return wrapPaths(paths, func(_ string, _ *groupInput, rewrite func() ([]iceberg.DataFile, int64, error)) ([]iceberg.DataFile, int64, error) {
		files, rows, err := rewrite()
		if !isDeclined(err) {
			cancel(cause)
		}
		return files, rows, err
	})
}

// writeMode is one way a group of plain files can be rewritten: the paths
// given to execute, which force it.
type writeMode struct {
	path  string // the path's name
	paths []rewritePath
}

// writeModes are leaf by leaf, as Arrow batches, through iceberg-go: the
// last is the reference the others are compared with.
var writeModes = []writeMode{
	{"copy", defaultPaths()},
	{"direct", []rewritePath{arrowPath(0), scanPath}},
	{"iceberg-go", []rewritePath{scanPath}},
}

// faultyIO is a table's IO whose reads fail where a test says: openFails
// is asked at each Open with the path and how many times it was opened
// before, readFails at each ReadAt of a file it opened.
type faultyIO struct {
	iceio.WriteFileIO
	openFails func(path string, opened int) error
	readFails func(path string, off int64, n int) error
	// created, when set, sees the path of every file created.
	created func(path string)

	mu     sync.Mutex
	opened map[string]int
}

func (f *faultyIO) Create(path string) (iceio.FileWriter, error) {
	if f.created != nil {
		f.created(path)
	}
	return f.WriteFileIO.Create(path)
}

func (f *faultyIO) Open(path string) (iceio.File, error) {
	f.mu.Lock()
	if f.opened == nil {
		f.opened = map[string]int{}
	}
	n := f.opened[path]
	f.opened[path]++
	f.mu.Unlock()
	if f.openFails != nil {
		if err := f.openFails(path, n); err != nil {
			return nil, err
		}
	}
	file, err := f.WriteFileIO.Open(path)
	if err != nil || f.readFails == nil {
		return file, err
	}
	return &faultyFile{File: file, path: path, fails: f.readFails}, nil
}

type faultyFile struct {
	iceio.File
	path  string
	fails func(path string, off int64, n int) error
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fails(f.path, off, len(p)); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// withIO returns tbl reading and writing its files through fs.
func withIO(t *testing.T, tbl *table.Table, cat table.CatalogIO, wrap func(iceio.WriteFileIO) iceio.IO) *table.Table {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("the table's IO %T cannot write", fs)
	}
	wrapped := wrap(wfs)
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(),
		func(context.Context) (iceio.IO, error) { return wrapped, nil }, cat)
}

// commitHook is a catalog whose tables run before, ahead of each commit
// they send (attempt counts them from 0); an error it returns is the
// commit's. Other writers go to the real catalog.
type commitHook struct {
	real interface {
		TableLoader
		table.CatalogIO
	}
	before   func(attempt int) error
	attempts int
	// wrapIO, when set, wraps the IO of every table the hook hands out.
	wrapIO func(iceio.WriteFileIO) iceio.IO
}

func hookCommits(t *testing.T, f *fixture, before func(attempt int) error) *commitHook {
	t.Helper()
	real, ok := f.cat.(interface {
		TableLoader
		table.CatalogIO
	})
	if !ok {
		t.Fatalf("catalog %T cannot commit", f.cat)
	}
	return &commitHook{real: real, before: before}
}

// table returns tbl committing through c.
func (c *commitHook) table(tbl *table.Table) *table.Table {
	fsF := tbl.FS
	if c.wrapIO != nil {
		fsF = func(ctx context.Context) (iceio.IO, error) {
			fs, err := tbl.FS(ctx)
			if err != nil {
				return nil, err
			}
			return c.wrapIO(fs.(iceio.WriteFileIO)), nil
		}
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), fsF, c)
}

func (c *commitHook) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := c.real.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.table(tbl), nil
}

// swapper is the SQL catalog's compare-and-set (Options.Swap) of f's
// table, with c's hook run ahead of each swap as ahead of each commit.
func (c *commitHook) swapper(t *testing.T, f *fixture) metacommit.Swapper {
	t.Helper()
	rows, err := sqlcatalog.Open(sqliteshim.ShimName, "sqlite", sqliteuri.DSN(filepath.Join(f.dir, "cat.db")), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rows.Close() })
	return hookedSwap{c: c, rows: rows}
}

type hookedSwap struct {
	c    *commitHook
	rows *sqlcatalog.Rows
}

func (h hookedSwap) SwapMetadataLocation(ctx context.Context, ident table.Identifier, from, to string) (bool, error) {
	attempt := h.c.attempts
	h.c.attempts++
	if err := h.c.before(attempt); err != nil {
		return false, err
	}
	return h.rows.SwapMetadataLocation(ctx, ident, from, to)
}

func (c *commitHook) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	attempt := c.attempts
	c.attempts++
	if err := c.before(attempt); err != nil {
		return nil, "", err
	}
	return c.real.CommitTable(ctx, id, reqs, ups)
}
