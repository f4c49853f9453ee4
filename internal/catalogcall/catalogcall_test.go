package catalogcall

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// faulty is a real SQLite catalog whose calls can be made to fail or hang:
// fail returns the error of each call by number (1 = the first call of
// that kind; nil: pass through); hang blocks the call, ignoring its
// context, until the test ends.
type faulty struct {
	Inner
	loads, commits, lists atomic.Int32
	loadErr, listErr      func(n int32) error
	hangLoads, hangCommit bool
	// landThenHang: the commit reaches the catalog, and its answer never
	// comes back.
	landThenHang bool
	stop         chan struct{}
}

func (f *faulty) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	n := f.loads.Add(1)
	if f.hangLoads {
		<-f.stop
	}
	if f.loadErr != nil {
		if err := f.loadErr(n); err != nil {
			return nil, err
		}
	}
	return f.Inner.LoadTable(ctx, ident)
}

func (f *faulty) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	f.commits.Add(1)
	if f.hangCommit {
		<-f.stop
	}
	if f.landThenHang {
		if _, _, err := f.Inner.CommitTable(ctx, ident, reqs, ups); err != nil {
			return nil, "", err
		}
		<-f.stop
	}
	return f.Inner.CommitTable(ctx, ident, reqs, ups)
}

func (f *faulty) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	n := f.lists.Add(1)
	if f.listErr != nil {
		if err := f.listErr(n); err != nil {
			return func(yield func(table.Identifier, error) bool) { yield(nil, err) }
		}
	}
	return f.Inner.ListTables(ctx, ns)
}

func newFaulty(t *testing.T) (*faulty, table.Identifier) {
	t.Helper()
	opt := gen.Options{Appends: 2, RowsPerAppend: 10, Partitions: 1, Seed: 1}
	cat, _, _ := testenv.GeneratedTable(t, opt)
	f := &faulty{Inner: cat, stop: make(chan struct{})}
	t.Cleanup(func() { close(f.stop) })
	return f, opt.Identifier()
}

func wrap(t *testing.T, inner Inner, cfg Config) *Catalog {
	t.Helper()
	c, err := New(inner, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.delay = time.Millisecond
	return c
}

// A load that never answers fails after request_timeout on each of the
// max_attempts, naming the limit, even when the call ignores its context.
func TestHungLoadTimesOutAndIsRetried(t *testing.T) {
	f, ident := newFaulty(t)
	f.hangLoads = true
	c := wrap(t, f, Config{RequestTimeout: 50 * time.Millisecond, MaxAttempts: 3})
	_, err := c.LoadTable(t.Context(), ident)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want ErrTimeout wrapping the deadline", err)
	}
	for _, s := range []string{"catalog.request_timeout", "50ms", "3 attempts"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if got := f.loads.Load(); got != 3 {
		t.Errorf("load attempts = %d; want 3", got)
	}
}

// Transient failures are tried again up to max_attempts; a definite answer
// is returned at once.
func TestRetriesOnlyTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		calls int32
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, 3},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), 3},
		{"5xx", fmt.Errorf("%w: 502 bad gateway", rest.ErrServerError), 3},
		{"503", rest.ErrServiceUnavailable, 3},
		{"sqlite busy", errors.New("database is locked (5) (SQLITE_BUSY)"), 3},
		{"no such table", catalog.ErrNoSuchTable, 1},
		{"4xx", fmt.Errorf("%w: no", rest.ErrForbidden), 1},
		{"bad request", rest.ErrBadRequest, 1},
		{"conflict", table.ErrCommitFailed, 1},
		{"other", errors.New("metadata file is not JSON"), 1},
		{"missing local file", &fs.PathError{Op: "lstat", Path: "/wh", Err: syscall.ENOENT}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ident := newFaulty(t)
			f.loadErr = func(int32) error { return tc.err }
			c := wrap(t, f, Config{RequestTimeout: time.Minute, MaxAttempts: 3})
			if _, err := c.LoadTable(t.Context(), ident); !errors.Is(err, tc.err) {
				t.Fatalf("err = %v; want it to wrap %v", err, tc.err)
			}
			if got := f.loads.Load(); got != tc.calls {
				t.Errorf("attempts = %d; want %d", got, tc.calls)
			}
		})
	}
}

// A transient failure followed by an answer is an answer; a listing retried
// does not repeat tables.
func TestRetrySucceeds(t *testing.T) {
	f, ident := newFaulty(t)
	busy := errors.New("database is locked")
	f.loadErr = func(n int32) error {
		if n == 1 {
			return busy
		}
		return nil
	}
	f.listErr = f.loadErr
	c := wrap(t, f, DefaultConfig())
	tbl, err := c.LoadTable(t.Context(), ident)
	if err != nil || tbl == nil {
		t.Fatalf("load after one busy answer: %v", err)
	}
	var got []table.Identifier
	for id, err := range c.ListTables(t.Context(), ident[:1]) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if len(got) != 1 || !slices.Equal(got[0], ident) || f.lists.Load() != 2 {
		t.Errorf("tables %v after %d listings; want [%v] after 2", got, f.lists.Load(), ident)
	}
}

// setProperty loads the table through c and commits one property change
// through the table, as the tasks commit; it returns the commit's error.
func setProperty(t *testing.T, c *Catalog, ident table.Identifier, k, v string) error {
	t.Helper()
	tbl, err := c.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{k: v}); err != nil {
		t.Fatal(err)
	}
	_, err = txn.Commit(t.Context())
	return err
}

// A commit is sent once. One that gets no answer is unknown, not failed: a
// caller that took it for a conflict would delete files it may reference.
// Tables loaded through the wrapper commit through it.
func TestCommitSentOnceAndUnknownOnTimeout(t *testing.T) {
	f, ident := newFaulty(t)
	f.hangCommit = true
	c := wrap(t, f, Config{RequestTimeout: 50 * time.Millisecond, MaxAttempts: 3})
	err := setProperty(t, c, ident, "test", "1")
	if !errors.Is(err, ErrTimeout) || errors.Is(err, table.ErrCommitFailed) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("err = %v; want ErrTimeout, outcome unknown, not ErrCommitFailed", err)
	}
	if got := f.commits.Load(); got != 1 {
		t.Errorf("commits sent = %d; want 1", got)
	}
}

// A commit that landed but whose answer timed out is found by re-loading.
func TestCommitThatLandedIsVisibleAfterTimeout(t *testing.T) {
	f, ident := newFaulty(t)
	f.landThenHang = true
	c := wrap(t, f, Config{RequestTimeout: 200 * time.Millisecond, MaxAttempts: 1})
	if err := setProperty(t, c, ident, "landed", "yes"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v; want ErrTimeout", err)
	}
	fresh, err := c.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Properties()["landed"] != "yes" {
		t.Errorf("the commit that landed is not visible after a re-load: %v", fresh.Properties())
	}
}

// The caller's own cancellation is returned as it is, not retried.
func TestCallerCancellationIsNotRetried(t *testing.T) {
	f, ident := newFaulty(t)
	f.hangLoads = true
	c := wrap(t, f, Config{RequestTimeout: time.Minute, MaxAttempts: 3})
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("lease lost")
	time.AfterFunc(20*time.Millisecond, func() { cancel(stop) })
	if _, err := c.LoadTable(ctx, ident); !errors.Is(err, stop) {
		t.Fatalf("err = %v; want the caller's cause", err)
	}
	if got := f.loads.Load(); got != 1 {
		t.Errorf("attempts = %d; want 1", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{RequestTimeout: -time.Second, MaxAttempts: 0}.Validate()
	for _, s := range []string{"request_timeout", "max_attempts"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Validate = %v; want it to name %s", err, s)
		}
	}
}

// slowList yields its tables one at a time, each after a pause shorter
// than the request timeout: a long listing that keeps answering.
type slowList struct {
	Inner
	pause time.Duration
	n     int
}

func (s *slowList) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		for i := range s.n {
			select {
			case <-time.After(s.pause):
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			}
			if !yield(table.Identifier{"db", fmt.Sprintf("t%d", i)}, nil) {
				return
			}
		}
	}
}

// request_timeout bounds the wait for each table of a listing, not the
// whole listing: one that takes 2.5 timeouts but keeps answering is read
// whole, in one attempt. Each wait is a fifth of the timeout, so that a
// busy machine's scheduling delays do not reach it.
func TestLongListingThatKeepsAnsweringIsRead(t *testing.T) {
	f, _ := newFaulty(t)
	s := &slowList{Inner: f, pause: 200 * time.Millisecond, n: 10}
	c := wrap(t, s, Config{RequestTimeout: 800 * time.Millisecond, MaxAttempts: 1})
	var got int
	for _, err := range c.ListTables(t.Context(), table.Identifier{"db"}) {
		if err != nil {
			t.Fatalf("listing of 10 tables, 200ms apart, with an 800ms timeout: %v", err)
		}
		got++
	}
	if got != 10 {
		t.Fatalf("listed %d tables, want 10", got)
	}
	// A listing that stops answering still fails within the timeout.
	s.pause = time.Hour
	for _, err := range c.ListTables(t.Context(), table.Identifier{"db"}) {
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("stalled listing: %v, want ErrTimeout", err)
		}
	}
}
