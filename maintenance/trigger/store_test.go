package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sampleState(i int) State {
	at := time.Date(2025, 6, 1, 12, 0, i, 0, time.UTC)
	return State{
		LastRun: at, LastAttempt: at.Add(time.Minute), SnapshotID: int64(1000 + i), SequenceNumber: int64(i),
		TimestampMs: at.UnixMilli(), TableUUID: "uuid", LastResult: "succeeded",
	}
}

// checkStore exercises the Store contract shared by every implementation.
func checkStore(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	st, err := s.Load(ctx, "db.t", "compact")
	if err != nil || st != (State{}) {
		t.Fatalf("Load of an absent state = %+v, %v; want zero, nil", st, err)
	}
	want := sampleState(1)
	if err := s.Save(ctx, "db.t", "compact", want); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "db.t", "expire", sampleState(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "db.u", "compact", sampleState(3)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "db.t", "compact"); err != nil || got != want {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	if got, _ := s.Load(ctx, "db.t", "orphans"); got != (State{}) {
		t.Fatalf("another task's state leaked: %+v", got)
	}
	want = sampleState(4)
	if err := s.Save(ctx, "db.t", "compact", want); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "db.t", "compact"); got != want {
		t.Fatalf("after overwrite: %+v, want %+v", got, want)
	}
}

func TestMemStore(t *testing.T) {
	checkStore(t, NewMemStore())
	checkStore(t, &MemStore{}) // the zero value works too
}

func TestFileStoreRoundTripAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "state.json")
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, s)

	// The documented format.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int                                   `json:"version"`
		Tables  map[string]map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || len(doc.Tables) != 2 || len(doc.Tables["db.t"]) != 2 || doc.Tables["db.u"]["compact"] == nil {
		t.Fatalf("file content:\n%s", b)
	}
	if !strings.Contains(string(doc.Tables["db.t"]["compact"]), `"snapshot_id": 1004`) {
		t.Fatalf("state JSON: %s", doc.Tables["db.t"]["compact"])
	}

	re, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		table, task string
		want        State
	}{{"db.t", "compact", sampleState(4)}, {"db.t", "expire", sampleState(2)}, {"db.u", "compact", sampleState(3)}} {
		if got, err := re.Load(context.Background(), k.table, k.task); err != nil || got != k.want {
			t.Fatalf("reopened %s/%s = %+v, %v; want %+v", k.table, k.task, got, err, k.want)
		}
	}
}

func TestFileStoreZeroStateOmitsTimes(t *testing.T) {
	b, err := json.Marshal(State{SnapshotID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"snapshot_id":3}` {
		t.Fatalf("JSON of a partial state: %s", b)
	}
}

func TestFileStoreCorruptFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":    "{not json",
		"truncated":  `{"version":1,"tables":{"db.t":{"compact":{"snapshot_id":`,
		"empty":      "",
		"version":    `{"version":2,"tables":{}}`,
		"no version": `{"tables":{}}`,
		"trailing":   `{"version":1,"tables":{}} {}`,
		"wrong type": `{"version":1,"tables":{"db.t":{"compact":{"snapshot_id":"x"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := NewFileStore(path)
			if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("NewFileStore(%s) = %v; want an ErrCorrupt naming the path", name, err)
			}
			// Never silently reset.
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Fatalf("corrupt file was changed to %q", b)
			}
		})
	}
}

func TestFileStoreConcurrentSaves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const tables, tasks = 16, 3
	taskNames := []string{"compact", "expire", "orphans"}

	// A reader parses the file while it is rewritten: thanks to the
	// rename it only ever sees a whole file.
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			var doc fileDoc
			if err == nil {
				err = json.Unmarshal(b, &doc)
			}
			if err != nil {
				readerErr <- fmt.Errorf("reader saw a torn file (%d bytes): %v", len(b), err)
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range tables {
		for j := range tasks {
			wg.Go(func() {
				for round := range 3 {
					if err := s.Save(ctx, fmt.Sprintf("db.t%d", i), taskNames[j], sampleState(i*10+j+round)); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}

	re, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tables {
		for j := range tasks {
			want := sampleState(i*10 + j + 2)
			if got, _ := re.Load(ctx, fmt.Sprintf("db.t%d", i), taskNames[j]); got != want {
				t.Fatalf("db.t%d/%s after reopen = %+v, want %+v", i, taskNames[j], got, want)
			}
		}
	}
	// No temporary file is left behind.
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "state.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("folder holds %v, want only state.json", names)
	}
}

// A failed write leaves the store as the file: what Load returns is what a
// restart would find.
func TestFileStoreFailedSaveKeepsPreviousState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "state.json")
	s, err := NewFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Save(ctx, "db.t", "compact", sampleState(1)); err != nil {
		t.Fatal(err)
	}
	// Replace the folder by a file: creating the temporary file fails.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Save(ctx, "db.t", "compact", sampleState(2))
	if err == nil || !strings.Contains(err.Error(), "save trigger state of db.t/compact") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Save into a missing folder = %v", err)
	}
	if err := s.Save(ctx, "db.new", "expire", sampleState(3)); err == nil {
		t.Fatal("second Save succeeded")
	}
	if got, _ := s.Load(ctx, "db.t", "compact"); got != sampleState(1) {
		t.Fatalf("after a failed save: %+v, want the saved state", got)
	}
	if got, _ := s.Load(ctx, "db.new", "expire"); got != (State{}) {
		t.Fatalf("a failed save of a new key left %+v", got)
	}
}

func TestFileStoreCancelled(t *testing.T) {
	s, err := NewFileStore(filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Save(ctx, "db.t", "compact", sampleState(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a cancelled context = %v", err)
	}
	if _, err := s.Load(ctx, "db.t", "compact"); !errors.Is(err, context.Canceled) ||
		!strings.Contains(err.Error(), "load trigger state of db.t/compact") {
		t.Fatalf("Load with a cancelled context = %v", err)
	}
}

// fakeKV is an in-memory KV with the contract of redislock.Locker.
type fakeKV struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error
}

func (f *fakeKV) Get(_ context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return f.m[key], nil
}

func (f *fakeKV) Put(_ context.Context, key string, val []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.m[key] = append([]byte(nil), val...)
	return nil
}

func TestKVStore(t *testing.T) {
	kv := &fakeKV{m: map[string][]byte{}}
	s := NewKVStore(kv, "maint", "prod")
	checkStore(t, s)

	const k = "maint:state:prod:db.t:compact"
	if s.Key("db.t", "compact") != k {
		t.Fatalf("key %q, want %q", s.Key("db.t", "compact"), k)
	}
	var st State
	if err := json.Unmarshal(kv.m[k], &st); err != nil || st != sampleState(4) {
		t.Fatalf("stored value %s: %+v, %v", kv.m[k], st, err)
	}
	// Two catalogs with a table of the same name do not share state.
	if got, _ := NewKVStore(kv, "maint", "staging").Load(context.Background(), "db.t", "compact"); got != (State{}) {
		t.Fatalf("state leaked across catalogs: %+v", got)
	}

	kv.m[k] = []byte("{oops")
	_, err := s.Load(context.Background(), "db.t", "compact")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "load trigger state of db.t/compact") || !strings.Contains(err.Error(), k) {
		t.Fatalf("corrupt value: %v", err)
	}

	down := errors.New("connection refused")
	kv.fail = down
	if _, err := s.Load(context.Background(), "db.t", "compact"); !errors.Is(err, down) {
		t.Fatalf("Load with the backend down = %v", err)
	}
	if err := s.Save(context.Background(), "db.t", "compact", State{}); !errors.Is(err, down) ||
		!strings.Contains(err.Error(), "save trigger state of db.t/compact") {
		t.Fatalf("Save with the backend down = %v", err)
	}
}
