//go:build linux

package offheap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = os.Getpagesize()

func pages(n int) int { return (n + pageSize - 1) / pageSize * pageSize }

func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// mapPages maps n bytes (rounded up to whole pages) of zeroed memory.
func mapPages(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, pages(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// remapPages grows mapping m to at least n bytes, moving it if it must;
// the pages added are zeroed.
func remapPages(m []byte, n int) ([]byte, error) {
	return unix.Mremap(m, pages(n), unix.MREMAP_MAYMOVE)
}

func unmapPages(m []byte) error { return unix.Munmap(m) }

// protectPages makes m inaccessible and gives its memory back, keeping the
// addresses reserved.
func protectPages(m []byte) error {
	if err := unix.Mprotect(m, unix.PROT_NONE); err != nil {
		return err
	}
	return unix.Madvise(m, unix.MADV_DONTNEED)
}
