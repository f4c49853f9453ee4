package verify

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// dvMagic opens the body of a deletion-vector-v1 blob.
const dvMagic = 0xd1d33964

// readDeletionVector reads the deletion-vector-v1 blob at offset, size of a
// Puffin file: a big-endian length, the magic and a portable 64-bit roaring
// bitmap of deleted positions, then a CRC-32 of magic and bitmap.
func readDeletionVector(path string, offset, size int64) (map[int64]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, offset, size), buf); err != nil {
		return nil, fmt.Errorf("read deletion vector at %d+%d of %s: %w", offset, size, path, err)
	}
	if size < 12 || binary.BigEndian.Uint32(buf[4:]) != dvMagic {
		return nil, fmt.Errorf("bad deletion vector magic in %s at %d", path, offset)
	}
	n := int64(binary.BigEndian.Uint32(buf))
	if n != size-8 {
		return nil, fmt.Errorf("deletion vector length mismatch in %s: %d vs %d", path, n, size-8)
	}
	body := buf[4 : 4+n]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(buf[4+n:]) {
		return nil, fmt.Errorf("deletion vector CRC mismatch in %s at %d", path, offset)
	}
	bm := roaring64.New()
	if _, err := bm.ReadFrom(bytes.NewReader(body[4:])); err != nil {
		return nil, fmt.Errorf("decode deletion vector in %s at %d: %w", path, offset, err)
	}
	out := make(map[int64]bool, bm.GetCardinality())
	for it := bm.Iterator(); it.HasNext(); {
		out[int64(it.Next())] = true
	}
	return out, nil
}
