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
// must leave room for them).
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
	a.track(m, nil)
	return m[:n]
}

// Reallocate returns a buffer of n bytes that starts with b's bytes, b
// itself when it has the room (as GoAllocator does).
func (a *Allocator) Reallocate(n int, b []byte) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	if old := a.region(b); old != nil {
		if m, err := remapPages(old, n); err == nil {
			a.track(m, old)
			return m[:n]
		}
		// The mapping could not grow: copy into a new buffer.
		nb := a.Allocate(n)
		copy(nb, b)
		a.Free(b)
		return nb
	}
	if n < a.minSize {
		return a.heap.Reallocate(n, b)
	}
	nb := a.Allocate(n)
	copy(nb, b) // the heap buffer is left to the garbage collector
	return nb
}

// Free releases a mapped buffer; heap buffers are left to the garbage
// collector.
func (a *Allocator) Free(b []byte) {
	m := a.region(b)
	if m == nil {
		return
	}
	a.mu.Lock()
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

// region returns the whole mapping b starts, or nil when b is not mapped.
func (a *Allocator) region(b []byte) []byte {
	if cap(b) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.regions[base(b[:1])]
}

func (a *Allocator) track(m, old []byte) {
	a.mu.Lock()
	if old != nil {
		delete(a.regions, base(old))
		a.mapped -= int64(len(old))
	}
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
