package manifestscan

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// The Avro object container format, as every Iceberg implementation writes
// it: header (magic, a metadata map holding avro.schema and avro.codec, a
// 16-byte sync marker), then blocks (record count, byte size, data
// compressed with the codec, sync marker). Blocks are read one at a time
// from a buffered stream, so memory is bounded by the largest block, not
// the file.

var avroMagic = []byte{'O', 'b', 'j', 1}

// maxBlock bounds one block (compressed and uncompressed) and one metadata
// value, so a corrupt length cannot exhaust memory.
const maxBlock = 256 << 20

// container reads the records of one Avro container file.
type container struct {
	r      *bufio.Reader
	sync   []byte
	marker []byte
	codec  string
	schema []byte
	raw    []byte
	block  []byte
}

var containers = sync.Pool{New: func() any {
	return &container{r: bufio.NewReaderSize(nil, 64<<10), sync: make([]byte, 16), marker: make([]byte, 16)}
}}

// openContainer reads the header of an Avro container file; release the
// returned value when done.
func openContainer(r io.Reader) (*container, error) {
	f := containers.Get().(*container)
	f.r.Reset(r)
	magic := make([]byte, len(avroMagic))
	if n, err := io.ReadFull(f.r, magic); err != nil {
		f.release()
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		if bytes.HasPrefix(avroMagic, magic[:n]) {
			return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrTruncated, n)
		}
		return nil, ErrBadMagic
	}
	if !bytes.Equal(magic, avroMagic) {
		f.release()
		return nil, ErrBadMagic
	}
	meta, err := readMetadata(f.r)
	if err != nil {
		f.release()
		return nil, fmt.Errorf("avro header: %w", err)
	}
	f.codec, f.schema = string(meta["avro.codec"]), meta["avro.schema"]
	switch f.codec {
	case "", "null", "deflate", "snappy", "zstandard":
	default:
		f.release()
		return nil, fmt.Errorf("%w %q", ErrUnknownCodec, f.codec)
	}
	if _, err := io.ReadFull(f.r, f.sync); err != nil {
		f.release()
		return nil, fmt.Errorf("avro header: %w", eofIsTruncated(err))
	}
	return f, nil
}

func (f *container) release() {
	f.r.Reset(nil)
	f.schema = nil
	if cap(f.raw) > 4<<20 || cap(f.block) > 16<<20 {
		f.raw, f.block = nil, nil // do not pin a huge buffer
	}
	containers.Put(f)
}

// each runs prog over every record and calls fn after each one; fn must
// not keep the byte slices it finds in rec. rec starts zeroed.
func (f *container) each(prog step, rec *record, fn func() error) error {
	for n := 0; ; n++ {
		count, err := binary.ReadVarint(f.r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("avro block %d: %w", n, eofIsTruncated(err))
		}
		size, err := binary.ReadVarint(f.r)
		if err != nil {
			return fmt.Errorf("avro block %d: %w", n, eofIsTruncated(err))
		}
		if count < 0 || size < 0 || size > maxBlock {
			return fmt.Errorf("avro block %d: %w: record count %d, size %d", n, ErrCorrupt, count, size)
		}
		f.raw = grow(f.raw, int(size))
		if _, err := io.ReadFull(f.r, f.raw); err != nil {
			return fmt.Errorf("avro block %d: %w", n, eofIsTruncated(err))
		}
		if _, err := io.ReadFull(f.r, f.marker); err != nil {
			return fmt.Errorf("avro block %d: sync marker: %w", n, eofIsTruncated(err))
		}
		if !bytes.Equal(f.marker, f.sync) {
			return fmt.Errorf("avro block %d: %w: sync marker mismatch", n, ErrCorrupt)
		}
		block, err := decompress(f.codec, f.raw, f.block[:0])
		if err != nil {
			return fmt.Errorf("avro block %d (%s): %w: %v", n, f.codec, ErrCorrupt, err)
		}
		if f.codec != "" && f.codec != "null" {
			f.block = block
		}
		r := reader{b: block}
		for range count {
			rec.set = 0 // a program writes every slot it captures, null or not
			if err := prog(&r, rec); err != nil {
				return fmt.Errorf("avro block %d: %w", n, err)
			}
			if err := fn(); err != nil {
				return err
			}
		}
		if r.pos != len(r.b) {
			return fmt.Errorf("avro block %d: %w: %d bytes left after %d records", n, ErrCorrupt, len(r.b)-r.pos, count)
		}
	}
}

// eofIsTruncated classifies an end of input inside the framing.
func eofIsTruncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %v", ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func readMetadata(r *bufio.Reader) (map[string][]byte, error) {
	meta := map[string][]byte{}
	readBytes := func() ([]byte, error) {
		n, err := binary.ReadVarint(r)
		if err != nil {
			return nil, eofIsTruncated(err)
		}
		if n < 0 || n > maxBlock {
			return nil, fmt.Errorf("%w: metadata length %d", ErrCorrupt, n)
		}
		b := make([]byte, n)
		if _, err = io.ReadFull(r, b); err != nil {
			return nil, eofIsTruncated(err)
		}
		return b, nil
	}
	for {
		count, err := binary.ReadVarint(r)
		if err != nil {
			return nil, eofIsTruncated(err)
		}
		if count == 0 {
			return meta, nil
		}
		if count < 0 {
			count = -count
			if _, err := binary.ReadVarint(r); err != nil { // block byte size
				return nil, eofIsTruncated(err)
			}
		}
		for range count {
			k, err := readBytes()
			if err != nil {
				return nil, err
			}
			v, err := readBytes()
			if err != nil {
				return nil, err
			}
			meta[string(k)] = v
		}
	}
}

// Decompressors are pooled: a flate reader carries a 32 KiB window, and
// one zstd decoder serves every goroutine.
var (
	flatePool = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	zstdDec   = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxBlock))
	})
)

// decompress decodes one block with the file's codec, appending to dst.
func decompress(codec string, src, dst []byte) ([]byte, error) {
	switch codec {
	case "", "null":
		return src, nil
	case "deflate": // raw deflate (RFC 1951), no zlib header
		fr := flatePool.Get().(io.ReadCloser)
		defer flatePool.Put(fr)
		if err := fr.(flate.Resetter).Reset(bytes.NewReader(src), nil); err != nil {
			return nil, err
		}
		w := bytes.NewBuffer(dst)
		if _, err := w.ReadFrom(io.LimitReader(fr, maxBlock+1)); err != nil {
			return nil, err
		}
		if w.Len() > maxBlock {
			return nil, errors.New("block too large")
		}
		return w.Bytes(), nil
	case "snappy": // snappy block followed by the CRC-32 of the uncompressed data
		if len(src) < 4 {
			return nil, errors.New("short snappy block")
		}
		if n, err := snappy.DecodedLen(src[:len(src)-4]); err != nil || n > maxBlock {
			return nil, fmt.Errorf("bad snappy block (%d bytes): %v", n, err)
		}
		return snappy.Decode(dst[:cap(dst)], src[:len(src)-4])
	case "zstandard":
		d, err := zstdDec()
		if err != nil {
			return nil, err
		}
		return d.DecodeAll(src, dst)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownCodec, codec)
}

// reader reads Avro binary encoding from a byte slice.
type reader struct {
	b   []byte
	pos int
}

var errShort = fmt.Errorf("%w: record runs past the end of its block", ErrCorrupt)

func (r *reader) long() (int64, error) {
	// Inline fast path for one-byte varints.
	if r.pos < len(r.b) {
		if c := r.b[r.pos]; c < 0x80 {
			r.pos++
			return int64(c>>1) ^ -int64(c&1), nil
		}
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		return 0, errShort
	}
	r.pos += n
	return int64(v>>1) ^ -int64(v&1), nil
}

func (r *reader) next(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(r.b)-r.pos) {
		return nil, errShort
	}
	out := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out, nil
}

func (r *reader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	return r.next(n)
}
