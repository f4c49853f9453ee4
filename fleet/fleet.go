// Package fleet divides the managed tables among the `serve` replicas that
// share a lock backend. Each replica is a member: it writes a heartbeat that
// expires after a TTL, re-written every TTL/3, and reads the live members
// back. A table belongs to the live member that rendezvous
// (highest-random-weight) hashing of its name picks, so every replica that
// sees the same members agrees on every owner without talking to the
// others, and a member joining or leaving moves only its share (about 1/n)
// of the tables.
//
// Ownership only avoids wasted work: two replicas whose views differ for a
// moment (a member joined since one of them last looked) may both try a
// table, and the per-table lease decides. A replica that cannot reach the
// backend keeps its last view for at most one TTL (the time its own
// heartbeat lives), then owns nothing until it reaches the backend again:
// by then the others no longer count it, and take its tables.
//
// Each heartbeat carries the process's instance nonce, so two processes
// given the same id (scheduler.replica_id set to one literal on every pod)
// are found out: such replicas count as one member, both own that
// member's share, and the fleet does not divide. A member that finds its
// id heartbeated by another instance since its own last heartbeat says so
// (an error log, a counter, View.Conflict) and goes on: the per-table
// lease keeps the twins apart, as it does for any two replicas.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// Config says who this member is and how long its heartbeat lives.
type Config struct {
	// ID names this replica among the members; unique per process (the
	// pod name, or DefaultID).
	ID string
	// TTL is how long a heartbeat lives; it is written again every TTL/3.
	// A replica that stopped without leaving keeps its tables for at most
	// this long.
	TTL time.Duration
}

// DefaultConfig returns a Config with a DefaultID and a 60s TTL (the lock's
// default, so tables change hands as fast as leases expire).
func DefaultConfig() Config { return Config{ID: DefaultID(), TTL: time.Minute} }

// Validate reports every bad field; it never mutates c.
func (c Config) Validate() error {
	var v validate.Collector
	if strings.TrimSpace(c.ID) == "" {
		v.Add("replica_id", c.ID, "must not be empty")
	}
	if c.TTL < 3*time.Millisecond {
		v.Add("ttl", c.TTL, "must be at least 3ms")
	}
	return v.Err()
}

// DefaultID is the host name (a pod's name in Kubernetes) plus a random
// suffix, so two processes on one host, or a restarted pod whose old
// heartbeat still lives, are distinct members.
func DefaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "maintainer"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return host + "-" + hex.EncodeToString(b)
}

// Backend stores the heartbeats. lock/redislock.Locker implements it on
// Redis (a quorum of nodes), Local in process.
type Backend interface {
	// Heartbeat marks id alive for ttl, written by the process instance,
	// and returns the instance whose heartbeat of id it replaced: "" when
	// none lived, else another than instance when one was found (on several
	// nodes, on a quorum of them: a node that missed this process's first
	// heartbeat may still hold a dead predecessor's).
	Heartbeat(ctx context.Context, id, instance string, ttl time.Duration) (prev string, err error)
	// Members lists the ids whose heartbeat has not expired.
	Members(ctx context.Context) ([]string, error)
	// Leave removes id at once.
	Leave(ctx context.Context, id string) error
}

// Deps are the member's collaborators; Backend is required.
type Deps struct {
	Backend Backend
	Metrics *Metrics // nil records nothing
	Logger  *slog.Logger
	Now     func() time.Time
}

// Member is this replica's membership: its heartbeat and its view of the
// others. It is safe for concurrent use.
type Member struct {
	cfg      Config
	instance string // this process's nonce in its heartbeats
	b        Backend
	metrics  *Metrics
	log      *slog.Logger
	now      func() time.Time

	round sync.Mutex // one heartbeat-and-list round at a time

	mu      sync.Mutex
	members []string  // sorted, as of the last good round
	good    time.Time // start of the last good round (zero: none yet)
	lastErr string    // of the last round, "" when it was good
	left    bool
	beat    bool // a heartbeat of this member's has been stored
	// twin is the other instance last found heartbeating this id, at
	// twinAt (zero: none yet).
	twin   string
	twinAt time.Time
}

// New returns a member that has not joined yet: Refresh or Run joins.
func New(cfg Config, d Deps) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Backend == nil {
		return nil, errors.New("fleet: Deps.Backend is required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Member{cfg: cfg, instance: newInstance(), b: d.Backend, metrics: d.Metrics, log: d.Logger, now: d.Now}, nil
}

// newInstance is a random nonce naming one process among those that may
// share an id.
func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// ID is this member's id.
func (m *Member) ID() string { return m.cfg.ID }

// Run heartbeats every TTL/3 until ctx is done, then leaves the membership
// (so the others take this replica's tables at their next look, not a TTL
// later) and returns nil.
func (m *Member) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.leave(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
			_ = m.Refresh(ctx) // logged and counted there
		}
	}
}

// Refresh reads the members and then writes this member's heartbeat
// (only after a good listing, so a member is counted only while it can
// own tables). On
// failure the last view stays in force until a TTL after the last good
// round; the error is returned, logged at the first failure of a streak
// and counted.
func (m *Member) Refresh(ctx context.Context) error {
	m.round.Lock()
	defer m.round.Unlock()
	start := m.now()
	m.mu.Lock()
	left := m.left
	m.mu.Unlock()
	if left {
		return errors.New("fleet: left the membership (shutting down)")
	}
	// The listing first: a member that cannot list (its view expires) must
	// not go on heartbeating, or the others would count it for ever and
	// its share of the tables would be nobody's.
	var prev string
	members, err := m.b.Members(ctx)
	if err != nil {
		err = fmt.Errorf("fleet member %s: list members: %w", m.cfg.ID, err)
	} else if prev, err = m.b.Heartbeat(ctx, m.cfg.ID, m.instance, m.cfg.TTL); err != nil {
		err = fmt.Errorf("fleet member %s: heartbeat: %w", m.cfg.ID, err)
	}
	if err != nil && ctx.Err() != nil {
		return err // shutting down: not a membership problem
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.lastErr == "" {
			m.log.Warn("fleet membership unavailable; the last view holds until its heartbeat would expire, then this replica owns no table",
				"replica", m.cfg.ID, "until", m.good.Add(m.cfg.TTL), "err", err)
		}
		m.lastErr = err.Error()
		m.metrics.failed()
		m.metrics.members(m.viewLocked(m.now()).Members)
		return err
	}
	// The heartbeat just succeeded, so this member is alive though the
	// listing before it did not see it yet.
	if !slices.Contains(members, m.cfg.ID) {
		members = append(members, m.cfg.ID)
	}
	slices.Sort(members)
	members = slices.Compact(members)
	if m.lastErr != "" {
		m.log.Info("fleet membership reachable again", "replica", m.cfg.ID, "members", len(members))
	}
	if !slices.Equal(members, m.members) {
		m.log.Info("fleet members changed", "replica", m.cfg.ID, "members", strings.Join(members, ","))
	}
	m.members, m.good, m.lastErr = members, start, ""
	m.metrics.members(members)
	m.checkTwin(prev, start)
	m.beat = true
	return nil
}

// checkTwin records another instance found in this id's heartbeat. The
// first heartbeat of a process may replace a dead predecessor's (a pod
// restarted under its name, its old heartbeat not yet expired), so only a
// later one counts: by then only a live process can have written the id.
func (m *Member) checkTwin(prev string, at time.Time) {
	if !m.beat || prev == "" || prev == m.instance {
		return
	}
	if m.twinAt.IsZero() || at.Sub(m.twinAt) >= m.cfg.TTL { // once a streak: with 3 twins prev alternates
		m.log.Error("another process heartbeats this replica's id: replicas with one id count as one member and the fleet does not divide (each table keeps one runner at a time through its lease); give each replica its own scheduler.replica_id",
			"replica", m.cfg.ID, "instance", m.instance, "other_instance", prev)
	}
	m.twin, m.twinAt = prev, at
	m.metrics.conflict()
}

// leave removes this member from the membership, bounded by one TTL. From
// then on it owns nothing.
func (m *Member) leave(ctx context.Context) {
	m.round.Lock()
	defer m.round.Unlock()
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL)
	defer cancel()
	if err := m.b.Leave(ctx, m.cfg.ID); err != nil {
		m.log.Warn("fleet: leave the membership; the others take this replica's tables once its heartbeat expires",
			"replica", m.cfg.ID, "ttl", m.cfg.TTL, "err", err)
		return
	}
	m.log.Info("left the fleet", "replica", m.cfg.ID)
}

// View is a member's picture of the fleet at one moment: a value.
type View struct {
	Self    string
	Members []string // sorted; empty when the view is not valid
	// Valid: the last good round is younger than a TTL, so this member is
	// sure the others still count it.
	Valid bool
	// Until is when the view stops being valid without another good round.
	Until time.Time
	// Err is the last round's error ("" when it was good).
	Err string
	// Conflict says that another process heartbeated this member's id
	// within the last TTL ("" when none did).
	Conflict string
}

// View returns the current view.
func (m *Member) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.viewLocked(m.now())
}

func (m *Member) viewLocked(now time.Time) View {
	v := View{Self: m.cfg.ID, Members: []string{}, Err: m.lastErr}
	if !m.twinAt.IsZero() && now.Sub(m.twinAt) < m.cfg.TTL {
		v.Conflict = fmt.Sprintf("replica id %s is heartbeated by another process too (instance %s, this one %s, last seen %s): give each replica its own scheduler.replica_id",
			m.cfg.ID, m.twin, m.instance, m.twinAt.UTC().Format(time.RFC3339))
	}
	if m.good.IsZero() || m.left {
		return v
	}
	v.Until = m.good.Add(m.cfg.TTL)
	if now.Before(v.Until) {
		v.Valid, v.Members = true, slices.Clone(m.members)
	}
	return v
}

// Owns reports whether this member owns table in the current view: never
// while the view is not valid.
func (m *Member) Owns(table string) bool { return m.View().Owns(table) }

// Owns reports whether v's member owns table.
func (v View) Owns(table string) bool {
	return v.Valid && Owner(v.Members, table) == v.Self
}

// Owner is the member that rendezvous hashing gives key: the one whose
// hash of (member, key) is highest, the smaller id on a tie; "" when there
// are no members. Removing a member moves only its keys, and adding one
// moves to it only the keys it now wins, about 1/n of them.
func Owner(members []string, key string) string {
	var best string
	var bestW uint64
	for _, id := range members {
		w := weight(id, key)
		if best == "" || w > bestW || w == bestW && id < best {
			best, bestW = id, w
		}
	}
	return best
}

// weight is FNV-1a of member and key (separated by a byte no name holds),
// finished with splitmix64's mixer: FNV alone spreads names that differ in
// their last characters (t0001, t0002) poorly.
func weight(member, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
