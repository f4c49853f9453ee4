package offheap

import (
	"runtime/debug"
	"testing"
)

func TestMappedBuffersGrowAndAreUnmapped(t *testing.T) {
	var seen []int64
	a := New(MinSize(64<<10), OnChange(func(m int64) { seen = append(seen, m) }))

	small := a.Allocate(1000)
	if len(small) != 1000 || a.Mapped() != 0 {
		t.Fatalf("small buffer: len %d, mapped %d; want 1000 from the heap", len(small), a.Mapped())
	}

	b := a.Allocate(100 << 10)
	if len(b) != 100<<10 || a.Mapped() < 100<<10 {
		t.Fatalf("large buffer: len %d, mapped %d", len(b), a.Mapped())
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d is %d; want a zeroed buffer", i, v)
		}
	}
	for i := range b {
		b[i] = byte(i)
	}
	if same := a.Reallocate(50<<10, b); &same[0] != &b[0] || len(same) != 50<<10 {
		t.Fatal("shrinking must keep the buffer")
	}

	g := a.Reallocate(5<<20, b)
	if len(g) != 5<<20 {
		t.Fatalf("grown to %d bytes", len(g))
	}
	for i := range 100 << 10 {
		if g[i] != byte(i) {
			t.Fatalf("byte %d is %d after growth; want %d", i, g[i], byte(i))
		}
	}
	for i := 100 << 10; i < len(g); i += 4096 {
		if g[i] != 0 {
			t.Fatalf("byte %d of the grown part is %d; want 0", i, g[i])
		}
	}
	if a.Mapped() < 5<<20 || a.Mapped() > 5<<20+64<<10 {
		t.Fatalf("mapped %d after growth; want the grown buffer only", a.Mapped())
	}

	// A heap buffer that grows past the threshold moves to a mapping.
	h := a.Reallocate(200<<10, small)
	if len(h) != 200<<10 || a.Mapped() < 5<<20+200<<10 {
		t.Fatalf("heap buffer grown: len %d, mapped %d", len(h), a.Mapped())
	}

	a.Free(g)
	a.Free(h)
	a.Free(small) // a heap buffer: nothing to do
	if a.Mapped() != 0 {
		t.Fatalf("mapped %d after every buffer was freed", a.Mapped())
	}
	if len(seen) == 0 || seen[len(seen)-1] != 0 {
		t.Fatalf("OnChange saw %v; want it to end at 0", seen)
	}
}

// In guard mode a buffer used after it was freed faults: the tests of
// compaction run their writers on such an allocator.
func TestGuardFaultsOnUseAfterFree(t *testing.T) {
	a := New(Guard())
	b := a.Allocate(1 << 20)
	b[0] = 1
	a.Free(b)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	faulted := func() (f bool) {
		defer func() { f = recover() != nil }()
		readSink = b[4096]
		return false
	}()
	if !faulted {
		t.Fatal("reading a freed buffer did not fault")
	}
}

// readSink keeps the compiler from dropping the read of a freed buffer.
var readSink byte

// A scope frees what its abandoned user never freed, and a late free of
// such a buffer does not unmap a mapping that reused its addresses.
func TestScopeReleasesWhatWasNotFreed(t *testing.T) {
	a := New()
	s := a.Scope()
	kept := s.Allocate(1 << 20)
	grown := s.Reallocate(3<<20, s.Allocate(512<<10))
	freed := s.Allocate(1 << 20)
	s.Free(freed)
	if want := int64(4 << 20); a.Mapped() != want {
		t.Fatalf("mapped %d; want %d", a.Mapped(), want)
	}
	s.Release()
	if a.Mapped() != 0 {
		t.Fatalf("mapped %d after Release; want 0", a.Mapped())
	}
	other := a.Allocate(1 << 20) // may reuse kept's addresses
	other[0] = 7
	s.Free(kept) // late, as a GC cleanup would
	s.Free(grown)
	if a.Mapped() != 1<<20 || other[0] != 7 {
		t.Fatalf("a late free through the released scope unmapped another buffer: mapped %d", a.Mapped())
	}
	a.Free(other)
}
