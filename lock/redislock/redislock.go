// Package redislock is the Redis lock.Locker, on go-redsync (Redlock): one
// Redis, or several independent Redis nodes of which a quorum (n/2+1) must
// agree, so that replicas of the maintainer on different machines never
// maintain one table at once and the loss of a minority of nodes changes
// nothing.
//
// Besides locks it offers a small key-value store (Get, Put) on the same
// nodes, for trigger state that replicas share and that must survive a
// restart.
package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
	"github.com/iceberg-maintainer/maintainer/lock"
)

// Defaults applied by New to zero fields of Config.
const (
	// DefaultTimeout is the dial, read and write timeout: short, because a
	// lock backend that takes seconds to answer is as good as down, and a
	// lease must notice that before its TTL runs out.
	DefaultTimeout = 2 * time.Second
	// DefaultDriftFactor is redsync's (and Redlock's) allowance for clock
	// drift between this process and the nodes, as a fraction of the TTL.
	DefaultDriftFactor = 0.01
)

// acquireTimeoutFactor bounds one TryLock to this fraction of the TTL.
// redsync's default (0.05) gives a 300ms lock a 15ms budget, which a busy
// machine misses and reports as an outage; the per-command timeouts bound
// the call anyway, and a take slower than the TTL fails on its own.
const acquireTimeoutFactor = 0.5

// Config says where the Redis nodes are. Zero fields get the defaults above.
type Config struct {
	// Addrs are host:port of one Redis, or of several independent nodes
	// (not replicas of one another: each must hold its own copy of a lock)
	// of which a quorum, len(Addrs)/2+1, must answer.
	Addrs []string
	// Username and Password authenticate to every node (Username for Redis
	// 6 ACLs; empty for the default user).
	Username string
	Password string
	DB       int
	// DialTimeout, ReadTimeout and WriteTimeout bound each command on each
	// node; default DefaultTimeout.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// DriftFactor is the clock drift allowance as a fraction of the TTL,
	// subtracted from Handle.Until; in [0, 0.5), 0 means DefaultDriftFactor.
	DriftFactor float64
	// TLS, when non-nil, encrypts every connection (managed Redis with
	// in-transit encryption).
	TLS *tls.Config
}

// DefaultConfig is a Config with every default filled in and no Addrs.
func DefaultConfig() Config {
	return Config{
		DialTimeout: DefaultTimeout, ReadTimeout: DefaultTimeout, WriteTimeout: DefaultTimeout,
		DriftFactor: DefaultDriftFactor,
	}
}

// Validate reports every problem of c at once as validate.FieldErrors
// named by the config keys under lock.redis (the config loader reports them
// at their line); it never mutates c.
func (c Config) Validate() error {
	var v validate.Collector
	if len(c.Addrs) == 0 {
		v.Add("addrs", c.Addrs, "at least one host:port is required")
	}
	seen := make(map[string]bool, len(c.Addrs))
	for i, a := range c.Addrs {
		field := fmt.Sprintf("addrs[%d]", i)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			v.Add(field, a, "must be host:port")
			continue
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			v.Add(field, a, "port must be 1-65535")
			continue
		}
		// A node listed twice would vote twice and fake a quorum.
		norm := strings.ToLower(a)
		if seen[norm] {
			v.Add(field, a, "listed twice; each node must be independent")
		}
		seen[norm] = true
	}
	if c.DB < 0 {
		v.Add("db", c.DB, "must not be negative")
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"dial_timeout", c.DialTimeout}, {"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}} {
		if t.d < 0 {
			v.Add(t.name, t.d, "must not be negative")
		}
	}
	if c.DriftFactor < 0 || c.DriftFactor >= 0.5 {
		v.Add("drift_factor", c.DriftFactor, "must be in [0, 0.5)")
	}
	return v.Err()
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = d.ReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.DriftFactor == 0 {
		c.DriftFactor = d.DriftFactor
	}
	return c
}

// Locker is the Redis lock.Locker. It is safe for concurrent use; Close it
// when done.
type Locker struct {
	addrs   []string
	clients []*redis.Client
	rs      *redsync.Redsync
	quorum  int
	drift   float64

	mu      sync.Mutex
	lastVer int64 // last version timestamp Put used, for monotonic versions
}

var _ lock.Locker = (*Locker)(nil)

// New validates cfg and creates one go-redis client per node. It does not
// dial: a node that is down at start may come back, and Ping is how a caller
// checks reachability.
func New(cfg Config) (*Locker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Locker{
		addrs:  append([]string(nil), cfg.Addrs...),
		quorum: len(cfg.Addrs)/2 + 1,
		drift:  cfg.DriftFactor,
	}
	pools := make([]redsyncredis.Pool, len(cfg.Addrs))
	for i, addr := range cfg.Addrs {
		c := redis.NewClient(&redis.Options{
			Addr:         addr,
			Username:     cfg.Username,
			Password:     cfg.Password,
			DB:           cfg.DB,
			TLSConfig:    cfg.TLS,
			DialTimeout:  cfg.DialTimeout,
			ReadTimeout:  cfg.ReadTimeout,
			WriteTimeout: cfg.WriteTimeout,
			// No client-side retries: a SET NX retried after a lost
			// reply finds our own value and would report our lock as
			// taken; redsync and the lease decide what to retry.
			MaxRetries: -1,
			// One dial attempt, so a dead node fails in one DialTimeout
			// instead of five attempts with back-off.
			DialerRetries: 1,
			// Let callers' deadlines (the lease's Until) cut commands.
			ContextTimeoutEnabled: true,
			// Plain Redis: no cluster maintenance handshake on connect.
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		l.clients = append(l.clients, c)
		pools[i] = goredis.NewPool(c)
	}
	// Pools keep the order of Addrs (no WithShufflePools), so redsync's
	// node indexes in errors map back to addresses.
	l.rs = redsync.New(pools...)
	return l, nil
}

// Addrs are the nodes, in Config order.
func (l *Locker) Addrs() []string { return append([]string(nil), l.addrs...) }

// Quorum is how many nodes must agree: len(Addrs)/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Close closes every node's connections.
func (l *Locker) Close() error {
	var errs []error
	for i, c := range l.clients {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close redis %s: %w", l.addrs[i], err))
		}
	}
	return errors.Join(errs...)
}

// TryLock takes key on a quorum of nodes for ttl (SET NX PX with a random
// value; on failure the nodes it did get are released). It fails at once
// when the key is held; only a split vote between simultaneous contenders
// on several nodes is retried, a few times within a fraction of a second.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (lock.Handle, error) {
	if key == "" {
		return nil, errors.New("lock \"\": take: empty key")
	}
	if ttl < time.Millisecond {
		// Redis expiries have millisecond resolution.
		return nil, fmt.Errorf("lock %q: take: ttl must be at least 1ms (got %s)", key, ttl)
	}
	for attempt := 1; ; attempt++ {
		m := l.rs.NewMutex(key,
			redsync.WithExpiry(ttl),
			redsync.WithTries(1),
			redsync.WithDriftFactor(l.drift),
			redsync.WithTimeoutFactor(acquireTimeoutFactor),
			// No WithFailFast: returning once a quorum refused leaves
			// the SET NX still in flight to the other nodes, and the
			// cleanup DEL can overtake it, stranding our value there
			// for a whole TTL; under contention such strays from
			// several losers block the key with nobody holding it. A
			// hung node is bounded by ReadTimeout instead.
		)
		err := m.TryLockContext(ctx)
		if err == nil {
			return &handle{l: l, key: key, ttl: ttl, m: m, until: m.Until()}, nil
		}
		if attempt == splitVoteTries || !l.contended(ctx, key, err) {
			return nil, l.classify(ctx, key, opTake, err)
		}
		// Contenders split the nodes and nobody won; all have released
		// their share. Retry after a random delay so one of them wins,
		// rather than all reporting busy for a lock nobody holds.
		t := time.NewTimer(time.Millisecond + rand.N(time.Duration(attempt)*splitVoteJitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, l.classify(ctx, key, opTake, err)
		case <-t.C:
		}
	}
}

// Split votes: with several nodes, simultaneous takes can each win a
// minority of nodes so that nobody has a quorum. redsync then reports the
// key taken (ErrTaken when a quorum of nodes refused, even if each refused
// for a different contender), and every contender would report busy for a
// lock nobody holds. Redlock's answer is a retry after a random delay;
// TryLock does so a few times, quickly, and only when no single holder has
// a quorum: a lock that is really held is reported busy at once.
const (
	splitVoteTries  = 6
	splitVoteJitter = 15 * time.Millisecond // times the attempt number
)

// contended reports whether a failed take on several nodes failed only
// because of other contenders: enough nodes answered, some refused, and no
// single value holds a quorum of them now.
func (l *Locker) contended(ctx context.Context, key string, err error) bool {
	if len(l.addrs) == 1 || ctx.Err() != nil {
		return false
	}
	o := inspect(err)
	if len(l.addrs)-len(o.unreachable) < l.quorum || o.taken == 0 || o.failed || len(o.other) > 0 {
		return false
	}
	vals := make([]string, len(l.clients))
	l.each(ctx, func(ctx context.Context, i int, c *redis.Client) error {
		v, err := c.Get(ctx, key).Result()
		if err == nil {
			vals[i] = v
		}
		return err
	})
	count := make(map[string]int)
	for _, v := range vals {
		if v != "" {
			count[v]++
			if count[v] >= l.quorum {
				return false // a holder has it
			}
		}
	}
	return true
}

// Ping sends PING to every node and succeeds when a quorum answered; the
// error wraps ErrUnavailable and names every node that did not answer.
func (l *Locker) Ping(ctx context.Context) error {
	errs := l.NodeStatus(ctx)
	if ok := len(l.addrs) - len(errs); ok < l.quorum {
		return fmt.Errorf("redis lock backend: ping: %w: %s", lock.ErrUnavailable, l.quorumMessage(ok, errs))
	}
	return nil
}

// NodeStatus PINGs every node and returns the error of each node that did
// not answer, by address (empty when all are up). Ping only says whether a
// quorum is up; this says which nodes are down, for health reporting.
func (l *Locker) NodeStatus(ctx context.Context) map[string]error {
	return l.failures(l.each(ctx, func(ctx context.Context, _ int, c *redis.Client) error {
		return c.Ping(ctx).Err()
	}))
}

// each runs fn against every node concurrently and returns each node's
// error, in Addrs order.
func (l *Locker) each(ctx context.Context, fn func(ctx context.Context, node int, c *redis.Client) error) []error {
	errs := make([]error, len(l.clients))
	var wg sync.WaitGroup
	for i, c := range l.clients {
		wg.Go(func() { errs[i] = fn(ctx, i, c) })
	}
	wg.Wait()
	return errs
}

// failures maps each failed node's address to its error.
func (l *Locker) failures(errs []error) map[string]error {
	out := make(map[string]error)
	for i, err := range errs {
		if err != nil {
			out[l.addrs[i]] = err
		}
	}
	return out
}

// quorumMessage says how many nodes answered and why the others did not,
// with the unreachable nodes in Addrs order.
func (l *Locker) quorumMessage(answered int, unreachable map[string]error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d redis nodes answered, %d needed", answered, len(l.addrs), l.quorum)
	for _, a := range l.addrs {
		if err, ok := unreachable[a]; ok {
			fmt.Fprintf(&b, "; %s: %v", a, err)
		}
	}
	return b.String()
}

// handle is one holding. redsync's Mutex is not safe for concurrent use (it
// writes its expiry on Extend), so Extends are serialised and Until is kept
// here; Release only reads the Mutex's immutable value and may run beside a
// hung Extend.
type handle struct {
	l   *Locker
	key string
	ttl time.Duration
	m   *redsync.Mutex

	extendMu sync.Mutex

	mu    sync.Mutex
	until time.Time
}

func (h *handle) Extend(ctx context.Context) error {
	h.extendMu.Lock()
	defer h.extendMu.Unlock()
	start := time.Now()
	ok, err := h.m.ExtendContext(ctx)
	if !ok {
		return h.l.classify(ctx, h.key, opExtend, err)
	}
	// redsync's own validity formula: start + ttl - drift.
	until := start.Add(h.ttl - time.Duration(float64(h.ttl)*h.l.drift))
	h.mu.Lock()
	h.until = until
	h.mu.Unlock()
	return nil
}

func (h *handle) Until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// Release deletes the key on every node where it still holds our value
// (a compare-and-delete script, so a new holder's lock survives).
func (h *handle) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if !ok {
		return h.l.classify(ctx, h.key, opRelease, err)
	}
	return nil
}

type op string

const (
	opTake    op = "take"
	opExtend  op = "extend"
	opRelease op = "release"
)

// outcome is what redsync's error says about each node.
type outcome struct {
	unreachable map[int]error // node index -> network or server error
	taken       int           // nodes where another value holds the key (or, on extend/release, where ours is gone)
	expired     int           // nodes where the key was absent on release
	quorumTaken bool          // redsync's ErrTaken: a quorum of nodes refused
	failed      bool          // ErrFailed: the take was too slow to be valid
	extendSlow  bool          // ErrExtendFailed: the extension was too slow to be valid
	other       []error
}

// inspect walks redsync's error tree. redsync returns *ErrTaken,
// *ErrNodeTaken and *RedisError as pointers (their Error methods have value
// receivers, so errors.As with a value target never matches) and joins the
// per-node errors with errors.Join; both forms are handled here.
func inspect(err error) outcome {
	o := outcome{unreachable: map[int]error{}}
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case *redsync.RedisError:
			o.unreachable[e.Node] = e.Err
		case redsync.RedisError:
			o.unreachable[e.Node] = e.Err
		case *redsync.ErrNodeTaken, redsync.ErrNodeTaken:
			o.taken++
		case *redsync.ErrTaken:
			o.quorumTaken = true
			o.taken = max(o.taken, len(e.Nodes))
		case redsync.ErrTaken:
			o.quorumTaken = true
			o.taken = max(o.taken, len(e.Nodes))
		default:
			switch {
			case errors.Is(err, redsync.ErrLockAlreadyExpired):
				o.expired++
			case errors.Is(err, redsync.ErrFailed):
				o.failed = true
			case errors.Is(err, redsync.ErrExtendFailed):
				o.extendSlow = true
			default:
				o.other = append(o.other, err)
			}
		}
	}
	walk(err)
	return o
}

// classify turns redsync's error into one wrapping a lock sentinel, with the
// key, what was attempted, and which nodes failed how.
func (l *Locker) classify(ctx context.Context, key string, what op, err error) error {
	if ctx.Err() != nil {
		// Cancelled by the caller: neither busy nor an outage.
		return fmt.Errorf("lock %q: %s: %w (%v)", key, what, context.Cause(ctx), err)
	}
	o := inspect(err)
	answered := len(l.addrs) - len(o.unreachable)
	if answered < l.quorum {
		unreachable := make(map[string]error, len(o.unreachable))
		for n, e := range o.unreachable {
			if n >= 0 && n < len(l.addrs) {
				unreachable[l.addrs[n]] = e
			}
		}
		return fmt.Errorf("lock %q: %s: %w: %s", key, what, lock.ErrUnavailable, l.quorumMessage(answered, unreachable))
	}
	switch {
	case what == opTake && (o.quorumTaken || o.taken > 0):
		return fmt.Errorf("lock %q: take: %w (on %d of %d nodes)", key, lock.ErrBusy, o.taken, len(l.addrs))
	case what != opTake && (o.quorumTaken || o.taken > 0 || o.expired > 0):
		return fmt.Errorf("lock %q: %s: %w: not held by us on a quorum (%d of %d nodes expired or taken)",
			key, what, lock.ErrLost, o.taken+o.expired, len(l.addrs))
	case o.failed || o.extendSlow:
		return fmt.Errorf("lock %q: %s: %w: the nodes answered too slowly for the lock to be valid (ttl too short for this backend?)",
			key, what, lock.ErrUnavailable)
	}
	return fmt.Errorf("lock %q: %s: %w: %w", key, what, lock.ErrUnavailable, err)
}

// RouteClientLogs sends go-redis' process-wide log (every failed dial of a
// dead node, otherwise printed to stderr) to log at debug level. It is
// main's decision, since it affects the whole process.
func RouteClientLogs(log *slog.Logger) { redis.SetLogger(RedisLogger{Log: log}) }

// RedisLogger adapts a slog.Logger to go-redis' process-wide logger.
// Records are at debug level: node failures reach callers as errors and
// through Ping.
type RedisLogger struct{ Log *slog.Logger }

// Printf implements go-redis' internal.Logging.
func (r RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.Log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
