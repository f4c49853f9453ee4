// Package pqzstd replaces arrow-go's zstd codec for Parquet pages with one
// whose encoders outlive garbage collections.
//
// arrow-go keeps its per-level zstd encoders in a sync.Pool, which every
// collection empties. Compaction allocates fast and so collects often: the
// pool is emptied hundreds of times a run, and each new encoder allocates
// and zeroes its history window and match tables again (a few MiB each),
// which is churn on the heap, page faults and CPU for nothing. This codec
// keeps the encoders it made in a plain free list instead, until it has
// been idle for a while (a long-running serve gives them back between
// runs). Every encoder given back is kept: the free list never holds more
// than were busy at once, which the heap held at that moment anyway, while
// a cap below that (compaction runs a leaf writer per processor in each of
// several groups, and a goroutine is often preempted mid-page) dropped
// encoders all through a run, each rebuilt with its tables and window
// zeroed. They are built with arrow-go's options, so the bytes written are
// the same; decoding and streams are arrow-go's own. The best-compression
// level is left to arrow-go: its encoders hold tens of MiB of tables each.
//
// An encoder of arrow-go's options keeps a history buffer of twice the
// level's window (16 MiB at the default level), allocated and zeroed in
// full for the first page larger than a zstd block, though a page is
// about 1 MiB. This codec encodes a page with an encoder of the smallest
// window, from 1 MiB, that the page is shorter than: no match in one page
// reaches further back than the page's start and the frame header of a
// page shorter than the window does not depend on it, so the bytes are
// those of the level's own window, in a quarter of the memory or less.
// The encoders are also built with klauspost's lower-memory buffers,
// which hold a history of one window and a block rather than two
// windows: they change where a page longer than the window moves its
// history down, never what it matches (no match reaches past the window),
// so the bytes are the same (tested up to 20 MiB pages) in half the memory.
package pqzstd

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// Codec is a compress.Codec for zstd.
type Codec struct {
	base  codec         // arrow-go's codec, for everything but block encoding
	idle  time.Duration // after this long unused, the kept encoders go
	mu    sync.Mutex
	free  map[encoderKey][]*zstd.Encoder
	used  time.Time   // last put
	trim  *time.Timer // armed while encoders are kept
	built int         // encoders built, for tests
}

// encoderKey is a class of encoders: a level, and a window below the
// level's own (0: the level's own).
type encoderKey struct {
	level  zstd.EncoderLevel
	window int
}

// minWindow is the smallest window of an encoder: pages are about 1 MiB
// (write.parquet.page-size-bytes), dictionary pages up to 2 MiB.
const minWindow = 1 << 20

// keyFor is the class of encoders that encodes n bytes at level lv as an
// encoder of the level's own window does: the smallest window, from
// minWindow, that n bytes are shorter than, if that is below the level's.
func keyFor(lv zstd.EncoderLevel, n int) encoderKey {
	own := 8 << 20 // the window klauspost gives every level but the fastest
	if lv == zstd.SpeedFastest {
		own = 4 << 20
	}
	for w := minWindow; w < own; w <<= 1 {
		if n < w {
			return encoderKey{level: lv, window: w}
		}
	}
	return encoderKey{level: lv}
}

// idleAfter is how long kept encoders outlive their last use.
const idleAfter = 30 * time.Second

// codec is what arrow-go's zstd codec implements.
type codec interface {
	compress.ErrorCodec
	compress.StreamingCodec
}

// New returns a codec that delegates all but block encoding to base, the
// codec arrow-go registered for zstd.
func New(base compress.Codec) (*Codec, error) {
	b, ok := base.(codec)
	if !ok {
		return nil, fmt.Errorf("arrow-go's zstd codec %T lacks error-reporting decoding or streams", base)
	}
	return &Codec{base: b, idle: idleAfter, free: map[encoderKey][]*zstd.Encoder{}}, nil
}

// Register installs the codec for zstd in place of arrow-go's. arrow-go's
// registry is an unguarded map: call it before any Parquet is read or
// written, from main.
func Register() error {
	base, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return fmt.Errorf("find arrow-go's zstd codec: %w", err)
	}
	if _, ok := base.(*Codec); ok {
		return nil
	}
	c, err := New(base)
	if err != nil {
		return err
	}
	compress.RegisterCodec(compress.Codecs.Zstd, c)
	return nil
}

// level maps a Parquet compression level to an encoder level as arrow-go
// does.
func level(l int) zstd.EncoderLevel {
	if l == compress.DefaultCompressionLevel {
		return zstd.SpeedDefault
	}
	return zstd.EncoderLevelFromZstd(l)
}

// EncodeLevel compresses src in one frame at level, as arrow-go would.
func (c *Codec) EncodeLevel(dst, src []byte, l int) []byte {
	lv := level(l)
	if lv >= zstd.SpeedBestCompression {
		return c.base.EncodeLevel(dst, src, l)
	}
	k := keyFor(lv, len(src))
	enc := c.get(k)
	out := enc.EncodeAll(src, dst[:0])
	c.put(k, enc)
	return out
}

// Encode is arrow-go's: its single shared encoder has other options.
func (c *Codec) Encode(dst, src []byte) []byte { return c.base.Encode(dst, src) }

func (c *Codec) get(k encoderKey) *zstd.Encoder {
	c.mu.Lock()
	if f := c.free[k]; len(f) > 0 {
		enc := f[len(f)-1]
		c.free[k] = f[:len(f)-1]
		c.mu.Unlock()
		return enc
	}
	c.built++
	c.mu.Unlock()
	// arrow-go's options for block encoding (compress.zstdCodec).
	opts := []zstd.EOption{zstd.WithZeroFrames(true), zstd.WithEncoderLevel(k.level),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true), zstd.WithLowerEncoderMem(true)}
	if k.window > 0 {
		// After the level, which sets the block size only while the
		// window is its own.
		opts = append(opts, zstd.WithWindowSize(k.window))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		panic(fmt.Errorf("build zstd encoder: %w", err)) // only for invalid options
	}
	return enc
}

// put keeps enc for the next page of its class.
func (c *Codec) put(k encoderKey, enc *zstd.Encoder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free[k] = append(c.free[k], enc)
	c.used = time.Now()
	if c.trim == nil {
		c.trim = time.AfterFunc(c.idle, c.trimIdle)
	}
}

// trimIdle drops the kept encoders once none was used for c.idle.
func (c *Codec) trimIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wait := c.idle - time.Since(c.used); wait > 0 {
		c.trim.Reset(wait)
		return
	}
	clear(c.free)
	c.trim = nil
}

// kept returns how many encoders the codec keeps.
func (c *Codec) kept() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.free {
		n += len(f)
	}
	return n
}

func (c *Codec) CompressBound(n int64) int64         { return c.base.CompressBound(n) }
func (c *Codec) Decode(dst, src []byte) []byte       { return c.base.Decode(dst, src) }
func (c *Codec) NewReader(r io.Reader) io.ReadCloser { return c.base.NewReader(r) }
func (c *Codec) NewWriter(w io.Writer) io.WriteCloser {
	return c.base.NewWriter(w)
}

func (c *Codec) DecodeWithError(dst, src []byte) ([]byte, error) {
	return c.base.DecodeWithError(dst, src)
}

func (c *Codec) NewWriterLevel(w io.Writer, l int) (io.WriteCloser, error) {
	return c.base.NewWriterLevel(w, l)
}

var _ codec = (*Codec)(nil)
