package compact

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// pageBuffers is the allocator of the input files' page readers in copy
// mode. arrow-go's page reader allocates a 16 KiB buffer for compressed
// pages and one each for the decompressed data and dictionary pages of
// every column chunk it opens: on files of a few KiB that is most of what
// a rewrite allocates, and what keeps the garbage collector busy. The copy
// path closes each input file's page readers once the file is finished
// (copySource.finish), when nothing refers to their bytes any more, and
// the buffers they return serve the next file's readers.
//
// Buffers of 4 KiB to 8 MiB are kept, by power-of-two size; a buffer is
// zeroed when it is returned, so it comes back as a new one would, and a
// reference kept past its reader's close reads zeros rather than the next
// file's bytes. A buffer grown by Reallocate is left to the garbage
// collector: a page of it may still be in use.
type pageBuffers struct {
	classes [maxPageClass - minPageClass + 1]sync.Pool
	made    atomic.Int64 // buffers of a class made new, not taken back
}

const (
	minPageClass = 12 // 4 KiB
	maxPageClass = 23 // 8 MiB
)

// pageClass is the class of buffers of at least size bytes, or -1 when
// such buffers are not kept.
func pageClass(size int) int {
	if size <= 0 || size > 1<<maxPageClass {
		return -1
	}
	c := max(bits.Len(uint(size-1)), minPageClass)
	return c - minPageClass
}

func (p *pageBuffers) Allocate(size int) []byte {
	c := pageClass(size)
	if c < 0 {
		return make([]byte, size)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:size]
	}
	p.made.Add(1)
	return make([]byte, size, 1<<(c+minPageClass))
}

func (p *pageBuffers) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	return nb
}

func (p *pageBuffers) Free(b []byte) {
	c := pageClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minPageClass) {
		return // not one of ours
	}
	b = b[:cap(b)]
	clear(b)
	p.classes[c].Put(&b)
}
