// Package catalogcall bounds every request to an Iceberg catalog: each call
// has a timeout, and reads that failed transiently (no answer in time, a
// refused or reset connection, a 5xx, a busy SQLite database) are tried again
// a bounded number of times. A commit is sent once: if it gets no answer its
// outcome is unknown, and resending it could make a commit that did land look
// like a conflict, after which the caller would delete files the table now
// references. The caller reconciles an unknown commit by re-loading.
package catalogcall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/units"
	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// Config bounds the requests; its keys sit in the config's catalog block.
type Config struct {
	// RequestTimeout bounds one request (one attempt).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxAttempts bounds the attempts of a read (load, list); commits are
	// attempted once.
	MaxAttempts int `yaml:"max_attempts"`
}

// DefaultConfig allows a slow catalog half a minute per request and rides
// out a blip of a second or two.
func DefaultConfig() Config { return Config{RequestTimeout: 30 * time.Second, MaxAttempts: 3} }

// Validate reports every problem at once; it never changes c.
func (c Config) Validate() error {
	var v validate.Collector
	if c.RequestTimeout <= 0 {
		v.Add("request_timeout", c.RequestTimeout, "must be > 0")
	}
	if c.MaxAttempts < 1 {
		v.Add("max_attempts", c.MaxAttempts, "must be at least 1")
	}
	return v.Err()
}

// Inner is the catalog being wrapped (the runner's maintenance.Catalog).
type Inner interface {
	LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error)
	CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
	ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error]
	ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error)
}

// ErrTimeout marks a request that got no answer within RequestTimeout.
var ErrTimeout = errors.New("no answer from the catalog")

// retryDelay is the wait before the second attempt, doubled for each
// further one.
const retryDelay = 250 * time.Millisecond

// Catalog is Inner with every request bounded. Tables it loads commit
// through it too.
type Catalog struct {
	// Endpoint names the catalog in timeout errors (its name and address,
	// without credentials); "" names none.
	Endpoint string
	inner    Inner
	cfg      Config
	log      *slog.Logger
	delay    time.Duration // before the second attempt
}

// New wraps inner; log receives a warning for each retried request.
func New(inner Inner, cfg Config, log *slog.Logger) (*Catalog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("catalog request limits: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Catalog{inner: inner, cfg: cfg, log: log, delay: retryDelay}, nil
}

// LoadTable loads a table and rebinds it to c: iceberg-go commits a table
// through the catalog it was built with, so without this a table's commits
// would bypass the timeout.
func (c *Catalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := retry(ctx, c, "load table", func(ctx context.Context) (*table.Table, error) { return c.inner.LoadTable(ctx, ident) })
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c,
		table.WithMetricsReporter(tbl.MetricsReporter())), nil
}

type committed struct {
	meta table.Metadata
	loc  string
}

// CommitTable sends a commit once. One that got no answer in time wraps
// ErrTimeout and not table.ErrCommitFailed: it may have landed.
func (c *Catalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	res, err := attempt(ctx, c, "commit table", func(ctx context.Context) (committed, error) {
		meta, loc, err := c.inner.CommitTable(ctx, ident, reqs, updates)
		return committed{meta, loc}, err
	})
	if errors.Is(err, ErrTimeout) {
		return nil, "", fmt.Errorf("commit to table %s, outcome unknown (it may have landed): %w", strings.Join(ident, "."), err)
	}
	return res.meta, res.loc, err
}

// ListNamespaces lists the namespaces under parent.
func (c *Catalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	return retry(ctx, c, "list namespaces", func(ctx context.Context) ([]table.Identifier, error) {
		return c.inner.ListNamespaces(ctx, parent)
	})
}

// ListTables lists the tables of ns. The listing is read in full before any
// is yielded, so a retry cannot repeat tables; RequestTimeout bounds the
// wait for each table of it, not the whole listing, so a catalog of many
// pages that keeps answering is not taken for one that stopped.
func (c *Catalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		got, err := retry(ctx, c, "list tables", func(ctx context.Context) ([]table.Identifier, error) {
			var out []table.Identifier
			for ident, err := range c.inner.ListTables(ctx, ns) {
				if err != nil {
					return nil, err
				}
				out = append(out, ident)
				progressed(ctx)
			}
			return out, nil
		})
		if err != nil {
			yield(nil, err)
			return
		}
		for _, ident := range got {
			if !yield(ident, nil) {
				return
			}
		}
	}
}

// retry makes up to MaxAttempts attempts of a read while it fails
// transiently and ctx lasts.
func retry[T any](ctx context.Context, c *Catalog, what string, call func(context.Context) (T, error)) (T, error) {
	delay := c.delay
	for n := 1; ; n++ {
		v, err := attempt(ctx, c, what, call)
		if err == nil || ctx.Err() != nil || !Transient(err) {
			return v, err
		}
		if n >= c.cfg.MaxAttempts {
			if n > 1 {
				err = fmt.Errorf("%w (gave up after %d attempts, catalog.max_attempts)", err, n)
			}
			return v, err
		}
		c.log.Warn("catalog request failed; trying again", "request", what, "attempt", n, "max_attempts", c.cfg.MaxAttempts,
			"after", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		delay *= 2
	}
}

// attempt makes one call under RequestTimeout, recorded as what the caller
// waits on (package waiting). The call runs on its own
// goroutine so that one that ignores its context cannot hold the caller past
// the timeout; its late answer is dropped.
func attempt[T any](ctx context.Context, c *Catalog, what string, call func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The deadline is a timer a call may push back (progressed) while it
	// reads a long answer.
	timer := time.AfterFunc(c.cfg.RequestTimeout, cancel)
	defer timer.Stop()
	cctx = context.WithValue(cctx, progressKey{}, func() { timer.Reset(c.cfg.RequestTimeout) })
	defer waiting.Begin(ctx, "catalog: "+what)()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := call(cctx)
		done <- answer{v, err}
	}()
	var zero T
	select {
	case a := <-done:
		if a.err != nil && ctx.Err() == nil && cctx.Err() != nil {
			return zero, c.timeout(a.err)
		}
		return a.v, a.err
	case <-cctx.Done():
		if ctx.Err() != nil {
			return zero, context.Cause(ctx)
		}
		return zero, c.timeout(context.DeadlineExceeded)
	}
}

type progressKey struct{}

// progressed tells the attempt running under ctx that its call is still
// receiving its answer: the request timeout starts again.
func progressed(ctx context.Context) {
	if f, ok := ctx.Value(progressKey{}).(func()); ok {
		f()
	}
}

func (c *Catalog) timeout(err error) error {
	from := ""
	if c.Endpoint != "" {
		from = ": " + c.Endpoint
	}
	return fmt.Errorf("%w within %s (catalog.request_timeout)%s: %w", ErrTimeout, units.FormatDuration(c.cfg.RequestTimeout), from, err)
}

// Transient reports errors worth another attempt of a read: no answer in
// time, a connection that failed, a server error, a busy database. What the
// catalog answered definitely (no such table, a 4xx, a conflict) is not.
func Transient(err error) bool {
	switch {
	case errors.Is(err, ErrTimeout), errors.Is(err, rest.ErrServiceUnavailable), errors.Is(err, rest.ErrServerError):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace),
		errors.Is(err, table.ErrCommitFailed), errors.Is(err, rest.ErrRESTError):
		return false
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	// A network operation that failed, or timed out; not any error with a
	// Timeout method (a syscall.Errno such as ENOENT of a local catalog has
	// one).
	var op *net.OpError
	var ne net.Error
	if errors.As(err, &op) || errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}
