package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrCorrupt marks stored trigger state that cannot be decoded. It is never
// silently reset: that would make every task look never run.
var ErrCorrupt = errors.New("corrupt trigger state")

// Store keeps the State of each table and task between passes.
type Store interface {
	// Load returns the zero State and no error when nothing is stored.
	Load(ctx context.Context, table, task string) (State, error)
	Save(ctx context.Context, table, task string, st State) error
}

func loadErr(table, task string, err error) error {
	return fmt.Errorf("load trigger state of %s/%s: %w", table, task, err)
}

func saveErr(table, task string, err error) error {
	return fmt.Errorf("save trigger state of %s/%s: %w", table, task, err)
}

type key struct{ table, task string }

// MemStore keeps state in memory: tests, and a process without a state
// file, where every start is "never run". The zero value is ready to use.
type MemStore struct {
	mu sync.Mutex
	m  map[key]State
}

func NewMemStore() *MemStore { return &MemStore{m: map[key]State{}} }

func (s *MemStore) Load(ctx context.Context, table, task string) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, loadErr(table, task, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key{table, task}], nil
}

func (s *MemStore) Save(ctx context.Context, table, task string, st State) error {
	if err := ctx.Err(); err != nil {
		return saveErr(table, task, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[key]State{}
	}
	s.m[key{table, task}] = st
	return nil
}

// fileVersion is the format version of a FileStore file.
const fileVersion = 1

type fileDoc struct {
	Version int                         `json:"version"`
	Tables  map[string]map[string]State `json:"tables"`
}

// FileStore keeps all state in one local JSON file,
// {"version":1,"tables":{table:{task:State}}}, for a single process with a
// local lock (replicas share state through a KVStore instead). The file is
// read once when opened; each Save rewrites it atomically, so a crash leaves
// either the old or the new file, never a torn one.
type FileStore struct {
	path string
	mu   sync.Mutex // guards tables and serialises writes of the file
	// tables mirrors the file as last written.
	tables map[string]map[string]State
}

// NewFileStore opens (or prepares) the state file at path, creating its
// folder. A file that does not decode is an error naming the path.
func NewFileStore(path string) (*FileStore, error) {
	if path == "" {
		return nil, errors.New("open trigger state file: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open trigger state file %s: %w", path, err)
	}
	s := &FileStore{path: path, tables: map[string]map[string]State{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open trigger state file %s: %w", path, err)
	}
	var doc fileDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("open trigger state file %s: %w: %v", path, ErrCorrupt, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("open trigger state file %s: %w: data after the JSON object", path, ErrCorrupt)
	}
	if doc.Version != fileVersion {
		return nil, fmt.Errorf("open trigger state file %s: %w: version %d, want %d", path, ErrCorrupt, doc.Version, fileVersion)
	}
	for t, tasks := range doc.Tables {
		if tasks != nil {
			s.tables[t] = tasks
		}
	}
	return s, nil
}

// Path is the file the store writes.
func (s *FileStore) Path() string { return s.path }

func (s *FileStore) Load(ctx context.Context, table, task string) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, loadErr(table, task, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables[table][task], nil
}

// Save records st and rewrites the file. If the write fails, the store
// keeps the state the file holds.
func (s *FileStore) Save(ctx context.Context, table, task string, st State) error {
	if err := ctx.Err(); err != nil {
		return saveErr(table, task, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tasks := s.tables[table]
	if tasks == nil {
		tasks = map[string]State{}
		s.tables[table] = tasks
	}
	prev, had := tasks[task]
	tasks[task] = st
	if err := s.write(); err != nil {
		if had {
			tasks[task] = prev
		} else {
			delete(tasks, task)
			if len(tasks) == 0 {
				delete(s.tables, table)
			}
		}
		return saveErr(table, task, fmt.Errorf("write %s: %w", s.path, err))
	}
	return nil
}

// write replaces the file with the current tables: a temporary file in the
// same folder, synced, then renamed over the old one, then the folder synced
// so that the rename itself survives a power loss.
func (s *FileStore) write() (err error) {
	b, err := json.MarshalIndent(fileDoc{Version: fileVersion, Tables: s.tables}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir, base := filepath.Split(s.path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, s.path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	return errors.Join(serr, cerr)
}

// KV is the part of a key-value backend (redislock.Locker) that KVStore
// needs. Get returns nil and no error when the key is absent.
type KV interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, val []byte) error
}

// KVStore keeps each table and task's State as one JSON value in a shared
// KV, so that replicas agree on when a task last ran. Writes of one table
// happen under its lease, so last-writer-wins per key is enough.
type KVStore struct {
	kv              KV
	prefix, catalog string
}

// NewKVStore stores under prefix + ":state:" + catalog + ":" + table + ":"
// + task; the catalog keeps two catalogs with same-named tables apart.
func NewKVStore(kv KV, prefix, catalog string) *KVStore {
	return &KVStore{kv: kv, prefix: prefix, catalog: catalog}
}

// Key is where the State of table and task is stored.
func (s *KVStore) Key(table, task string) string {
	return s.prefix + ":state:" + s.catalog + ":" + table + ":" + task
}

func (s *KVStore) Load(ctx context.Context, table, task string) (State, error) {
	k := s.Key(table, task)
	b, err := s.kv.Get(ctx, k)
	if err != nil {
		return State{}, loadErr(table, task, fmt.Errorf("get %s: %w", k, err))
	}
	if b == nil {
		return State{}, nil
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, loadErr(table, task, fmt.Errorf("key %s: %w: %v", k, ErrCorrupt, err))
	}
	return st, nil
}

func (s *KVStore) Save(ctx context.Context, table, task string, st State) error {
	k := s.Key(table, task)
	b, err := json.Marshal(st)
	if err != nil {
		return saveErr(table, task, err)
	}
	if err := s.kv.Put(ctx, k, b); err != nil {
		return saveErr(table, task, fmt.Errorf("put %s: %w", k, err))
	}
	return nil
}
