//go:build !linux

package offheap

import (
	"errors"
	"unsafe"
)

// Elsewhere every buffer comes from the Go heap.

var errUnsupported = errors.New("offheap: memory mappings are used on Linux only")

func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func mapPages(int) ([]byte, error)           { return nil, errUnsupported }
func remapPages([]byte, int) ([]byte, error) { return nil, errUnsupported }
func unmapPages([]byte) error                { return errUnsupported }
func protectPages([]byte) error              { return errUnsupported }
