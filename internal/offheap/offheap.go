// Package offheap is an Arrow allocator that keeps large buffers outside
// the Go heap, in anonymous memory mappings that are unmapped when Arrow
// frees them.
//
// Compaction's Parquet writer holds a whole row group of compressed pages
// in buffers that grow by doubling until the row group is written: on the
// Go heap those live buffers, and the garbage their growth leaves, set the
// garbage collector's heap goal (twice the live heap by default), so the
// process's peak memory is about twice what it needs. Mapped buffers cost
// exactly the pages written to, grow in place (mremap) without copying,
// and are returned to the system at once.
//
// Small buffers, and every buffer where mappings are unavailable, come
// from the Go heap as with Arrow's GoAllocator.
package offheap

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultMinSize is the smallest buffer mapped by default: below it the
// Go heap serves (mappings are whole pages, and a system call each).
const DefaultMinSize = 256 << 10

// Allocator implements memory.Allocator. Its zero value is not usable:
// build one with New.
type Allocator struct {
	heap     memory.Allocator
	minSize  int
	guard    bool
	onChange func(mapped int64)

	mu      sync.Mutex
	regions map[uintptr][]byte // base address -> the whole mapping
	mapped  int64
}

// Option configures an Allocator.
type Option func(*Allocator)

// MinSize maps buffers of at least n bytes.
func MinSize(n int) Option { return func(a *Allocator) { a.minSize = n } }

// OnChange is called, outside the allocator's lock, with the bytes mapped
// after every mapping, growth and unmapping (for a soft memory limit that
// must leave room for them). Calls may run concurrently and out of order:
// read Mapped for the current figure.
func OnChange(fn func(mapped int64)) Option { return func(a *Allocator) { a.onChange = fn } }

// Guard makes a freed mapping inaccessible for good instead of unmapping
// it, so that any use of a buffer after Arrow freed it faults at once
// rather than reading memory a later mapping reuses. For tests: the
// address space of freed buffers is never given back.
func Guard() Option { return func(a *Allocator) { a.guard = true } }

// New returns an allocator.
func New(opts ...Option) *Allocator {
	a := &Allocator{heap: memory.NewGoAllocator(), minSize: DefaultMinSize, regions: map[uintptr][]byte{}}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Mapped returns the bytes mapped now (buffers allocated and not freed).
func (a *Allocator) Mapped() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mapped
}

// Allocate returns a zeroed buffer of n bytes.
func (a *Allocator) Allocate(n int) []byte {
	if n < a.minSize {
		return a.heap.Allocate(n)
	}
	m, err := mapPages(n)
	if err != nil {
		return a.heap.Allocate(n)
	}
	a.track(m)
	return m[:n]
}

// Reallocate returns a buffer of n bytes that starts with b's bytes, b
// itself when it has the room (as GoAllocator does).
func (a *Allocator) Reallocate(n int, b []byte) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	if nb, ok := a.grow(n, b); ok {
		return nb
	}
	if n < a.minSize {
		return a.heap.Reallocate(n, b)
	}
	nb := a.Allocate(n)
	copy(nb, b) // the heap buffer is left to the garbage collector
	return nb
}

// grow grows a mapped buffer; false when b is not mapped.
func (a *Allocator) grow(n int, b []byte) ([]byte, bool) {
	a.mu.Lock()
	old := a.regions[base(b[:1])]
	if old == nil {
		a.mu.Unlock()
		return nil, false
	}
	var m []byte
	var err error
	if a.guard {
		// A new mapping, the old one made inaccessible: a slice kept
		// across the growth faults instead of reading reused memory.
		if m, err = mapPages(n); err == nil {
			copy(m, old)
			_ = protectPages(old)
		}
	} else {
		// Under the lock: mremap frees the old range inside the call, and
		// another mapping may get it before the old entry is dropped.
		m, err = remapPages(old, n)
	}
	if err != nil {
		a.mu.Unlock()
		// The mapping could not grow: copy into a new buffer.
		nb := a.Allocate(n)
		copy(nb, b)
		a.Free(b)
		return nb, true
	}
	delete(a.regions, base(old))
	a.regions[base(m)] = m
	a.mapped += int64(len(m) - len(old))
	mapped := a.mapped
	a.mu.Unlock()
	a.changed(mapped)
	return m[:n], true
}

// Free releases a mapped buffer; heap buffers are left to the garbage
// collector.
func (a *Allocator) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	a.mu.Lock()
	m := a.regions[base(b[:1])]
	if m == nil {
		a.mu.Unlock()
		return
	}
	// Dropped before the range is unmapped, so that no other mapping of
	// the same addresses can be tracked and then dropped here.
	delete(a.regions, base(m))
	a.mapped -= int64(len(m))
	mapped := a.mapped
	a.mu.Unlock()
	if a.guard {
		_ = protectPages(m)
	} else {
		_ = unmapPages(m)
	}
	a.changed(mapped)
}

func (a *Allocator) isMapped(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.regions[base(b[:1])] != nil
}

func (a *Allocator) track(m []byte) {
	a.mu.Lock()
	a.regions[base(m)] = m
	a.mapped += int64(len(m))
	mapped := a.mapped
	a.mu.Unlock()
	a.changed(mapped)
}

func (a *Allocator) changed(mapped int64) {
	if a.onChange != nil {
		a.onChange(mapped)
	}
}

var _ memory.Allocator = (*Allocator)(nil)

// Scope is an allocator for one user of the parent's (one Parquet file
// writer) that can free, at once, every mapped buffer it handed out and
// that was not freed: a writer abandoned after an error may never free
// its own. After Release, freeing through the scope does nothing, so a
// buffer freed late (arrow-go frees bloom filters from a GC cleanup) is
// not freed twice.
type Scope struct {
	a        *Allocator
	mu       sync.Mutex
	live     map[uintptr]struct{}
	released bool
}

// Scope returns a new scope of a.
func (a *Allocator) Scope() *Scope { return &Scope{a: a, live: map[uintptr]struct{}{}} }

func (s *Scope) Allocate(n int) []byte {
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if released {
		return s.a.heap.Allocate(n)
	}
	b := s.a.Allocate(n)
	s.note(nil, b)
	return b
}

func (s *Scope) Reallocate(n int, b []byte) []byte {
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if released {
		return s.a.heap.Reallocate(n, b)
	}
	nb := s.a.Reallocate(n, b)
	s.note(b, nb)
	return nb
}

func (s *Scope) Free(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || cap(b) == 0 {
		return
	}
	delete(s.live, base(b[:1]))
	s.a.Free(b)
}

// note records that old (if any) became nb.
func (s *Scope) note(old, nb []byte) {
	mapped := s.a.isMapped(nb)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(old) > 0 {
		delete(s.live, base(old[:1]))
	}
	if mapped {
		s.live[base(nb[:1])] = struct{}{}
	}
}

// Release frees every mapped buffer of the scope not freed yet. The
// scope's user must be done with them.
func (s *Scope) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	for p := range s.live {
		s.a.mu.Lock()
		m := s.a.regions[p]
		s.a.mu.Unlock()
		if m != nil {
			s.a.Free(m)
		}
	}
	clear(s.live)
}

var _ memory.Allocator = (*Scope)(nil)

// ScopeFunc returns a new scope and its Release, in the shape of an
// allocator its user declares on its side (compaction's WriterAllocator),
// so that the user does not depend on this package.
func (a *Allocator) ScopeFunc() (memory.Allocator, func()) {
	s := a.Scope()
	return s, s.Release
}
