package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
)

// AssistKV is the part of a key-value backend (redislock.Locker) that the
// assist board keeps its one document in.
type AssistKV interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, val []byte) error
}

// AssistBoard is where a replica that runs a large shared compaction (one
// on partition leases, compact.group_leases) asks the others for help, and
// where their schedulers look at each poll. It is one document under one
// key: the tables asking, each until a time its asker keeps moving on while
// it runs. A replica that dies stops moving it, so its request runs out.
// Two replicas writing at once can drop one's entry until its next refresh
// (a third of the TTL later): help comes late, never wrongly.
type AssistBoard struct {
	kv  AssistKV
	key string
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex // one read-modify-write at a time from this process
}

// AssistRequest is one table asking for help.
type AssistRequest struct {
	Table []string  `json:"table"` // the identifier
	By    string    `json:"by"`    // the asking run: host and run id
	Until time.Time `json:"until"`
}

// NewAssistBoard keeps the board under key (e.g. "<prefix>:assist:<catalog>",
// which no lock key can be); requests live ttl past their last refresh.
func NewAssistBoard(kv AssistKV, key string, ttl time.Duration, now func() time.Time) *AssistBoard {
	if now == nil {
		now = time.Now
	}
	return &AssistBoard{kv: kv, key: key, ttl: ttl, now: now}
}

// Open returns the requests that have not run out.
func (b *AssistBoard) Open(ctx context.Context) ([]AssistRequest, error) {
	all, err := b.read(ctx)
	if err != nil {
		return nil, err
	}
	now := b.now()
	return slices.DeleteFunc(all, func(a AssistRequest) bool { return !now.Before(a.Until) }), nil
}

func (b *AssistBoard) read(ctx context.Context) ([]AssistRequest, error) {
	raw, err := b.kv.Get(ctx, b.key)
	if err != nil {
		return nil, fmt.Errorf("read the assist board %s: %w", b.key, err)
	}
	var all []AssistRequest
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, fmt.Errorf("read the assist board %s: %w", b.key, err)
		}
	}
	return all, nil
}

// update rewrites the board: change edits the open requests.
func (b *AssistBoard) update(ctx context.Context, change func([]AssistRequest) []AssistRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	open, err := b.Open(ctx)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(change(open))
	if err != nil {
		return err
	}
	if err := b.kv.Put(ctx, b.key, raw); err != nil {
		return fmt.Errorf("write the assist board %s: %w", b.key, err)
	}
	return nil
}

// ask puts (or refreshes) the table's request for help by the asking run.
func (b *AssistBoard) ask(ctx context.Context, ident table.Identifier, by string) error {
	until := b.now().Add(b.ttl)
	return b.update(ctx, func(open []AssistRequest) []AssistRequest {
		open = slices.DeleteFunc(open, func(a AssistRequest) bool { return slices.Equal(a.Table, ident) && a.By == by })
		return append(open, AssistRequest{Table: ident, By: by, Until: until})
	})
}

// withdraw takes the run's request back once its compaction ended.
func (b *AssistBoard) withdraw(ctx context.Context, ident table.Identifier, by string) error {
	return b.update(ctx, func(open []AssistRequest) []AssistRequest {
		return slices.DeleteFunc(open, func(a AssistRequest) bool { return slices.Equal(a.Table, ident) && a.By == by })
	})
}

// askForHelp keeps the table's request on the board while the run goes on
// (refreshed every third of the TTL) and returns the func that withdraws
// it. A board that cannot be written costs help, never the run: it is
// logged.
func (r *Runner) askForHelp(ctx context.Context, ident table.Identifier, by string) (stop func()) {
	name := strings.Join(ident, ".")
	if err := r.assist.ask(ctx, ident, by); err != nil {
		r.log.Warn("ask the other replicas for help", "table", name, "err", err)
	} else {
		r.log.Info("asked the other replicas to help compact the table", "table", name, "by", by)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(r.assist.ttl/3, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := r.assist.ask(ctx, ident, by); err != nil {
					r.log.Warn("refresh the request for help", "table", name, "err", err)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if err := r.assist.withdraw(context.WithoutCancel(ctx), ident, by); err != nil {
			r.log.Warn("withdraw the request for help; it runs out by itself", "table", name, "err", err)
		}
	}
}

// helpOthers queues a compaction of every table another replica asks help
// for (at the end of a poll): partition leases keep the helpers apart.
func (s *Scheduler) helpOthers(ctx context.Context) {
	if s.assist == nil {
		return
	}
	open, err := s.assist.Open(ctx)
	if err != nil {
		s.log.Warn("poll: read the assist board", "err", err)
		return
	}
	for _, a := range open {
		name := strings.Join(a.Table, ".")
		// The board is the catalog's: a replica helps only with the tables
		// it manages (its selection, as of the last poll).
		s.mu.Lock()
		_, managed := s.known[name]
		s.mu.Unlock()
		if !managed || s.busy(name) {
			continue
		}
		res := "queued"
		if _, dup := s.add(name, a.Table, []string{TaskCompact}, "helping "+a.By+" compact it", "assist", true, false); dup {
			res = "duplicate"
		}
		s.metrics.trigger("assist", res)
		s.log.Info("queued to help another replica", "table", name, "asked_by", a.By)
	}
}
