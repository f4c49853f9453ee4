package pqzstd

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// pages returns inputs shaped like Parquet pages: tiny, repetitive,
// random, and larger than one zstd block.
func pages() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	var text bytes.Buffer
	for i := 0; text.Len() < 1<<20; i++ {
		text.WriteString("event-")
		text.WriteString(string(rune('a' + r.IntN(26))))
		text.WriteByte(byte(i))
	}
	return map[string][]byte{
		"one byte":   {7},
		"zeros":      make([]byte, 64<<10),
		"random":     random,
		"text, 1MiB": text.Bytes(),
		// Around the windows of the encoders (keyFor), with matches from
		// the far end of each: a block of random bytes, then it again.
		"1MiB-1, far matches":   repeated(r, 1<<20-1),
		"1MiB, far matches":     repeated(r, 1<<20),
		"1.4MiB, far matches":   repeated(r, 1400<<10),
		"2MiB+1, far matches":   repeated(r, 2<<20+1),
		"3.9MiB, far matches":   repeated(r, 3990<<10),
		"6MiB, far matches":     repeated(r, 6<<20),
		"4MiB+5, text repeated": bytes.Repeat(text.Bytes(), 5)[:4<<20+5],
		// Longer than the level's window: the encoder's history moves
		// down mid-page, at a point its buffer's size sets.
		"12MiB, far matches": repeated(r, 12<<20),
		"20MiB, text":        bytes.Repeat(text.Bytes(), 21)[:20<<20],
	}
}

// repeated returns n bytes: a random block of half of them, twice.
func repeated(r *rand.Rand, n int) []byte {
	half := make([]byte, (n+1)/2)
	for i := range half {
		half[i] = byte(r.Uint32())
	}
	return append(half, half[:n-len(half)]...)
}

func TestKeyFor(t *testing.T) {
	for _, c := range []struct {
		level  zstd.EncoderLevel
		n      int
		window int
	}{
		{zstd.SpeedDefault, 100, 1 << 20},
		{zstd.SpeedDefault, 1<<20 - 1, 1 << 20},
		{zstd.SpeedDefault, 1 << 20, 2 << 20},
		{zstd.SpeedDefault, 4<<20 - 1, 4 << 20},
		{zstd.SpeedDefault, 4 << 20, 0},
		{zstd.SpeedBetterCompression, 3 << 20, 4 << 20},
		{zstd.SpeedFastest, 2<<20 - 1, 2 << 20},
		{zstd.SpeedFastest, 2 << 20, 0},
	} {
		if got := keyFor(c.level, c.n); got != (encoderKey{level: c.level, window: c.window}) {
			t.Errorf("keyFor(%s, %d) = %+v, want window %d", c.level, c.n, got, c.window)
		}
	}
}

func TestEncodesWhatArrowGoEncodes(t *testing.T) {
	base, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if own, ok := base.(*Codec); ok { // TestRegister ran first
		base = own.base
	}
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range pages() {
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 3, 9, 19} {
			want := base.EncodeLevel(nil, src, level)
			// Twice: a reused encoder must not carry history over.
			for range 2 {
				got := c.EncodeLevel(make([]byte, 0, 16), src, level)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s at level %d: %d bytes differ from arrow-go's %d", name, level, len(got), len(want))
				}
				back, err := c.DecodeWithError(nil, got)
				if err != nil || !bytes.Equal(back, src) {
					t.Fatalf("%s at level %d: does not decode back (%v)", name, level, err)
				}
			}
		}
		if got, want := c.Encode(nil, src), base.Encode(nil, src); !bytes.Equal(got, want) {
			t.Fatalf("%s: Encode differs from arrow-go's", name)
		}
	}
	if _, err := c.DecodeWithError(nil, []byte("not zstd")); err == nil {
		t.Fatal("decoding garbage did not fail")
	}
}

func TestEncodersOutliveCollections(t *testing.T) {
	base, _ := compress.GetCodec(compress.Codecs.Zstd)
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	src := pages()["text, 1MiB"]
	for range 20 {
		c.EncodeLevel(nil, src, 3)
		runtime.GC()
	}
	if c.built != 1 {
		t.Fatalf("built %d encoders for 20 sequential pages with collections between, want 1", c.built)
	}
}

// However many encoders were busy at once, all come back for the next
// pages: compaction has more page writers than processors.
func TestEncodersBusyAtOnceAreKept(t *testing.T) {
	base, _ := compress.GetCodec(compress.Codecs.Zstd)
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	k := keyFor(zstd.SpeedDefault, 1<<20)
	busy := make([]*zstd.Encoder, 4*runtime.GOMAXPROCS(0))
	for range 2 {
		for i := range busy {
			busy[i] = c.get(k)
		}
		for _, enc := range busy {
			c.put(k, enc)
		}
	}
	if c.built != len(busy) {
		t.Fatalf("built %d encoders for %d busy at once twice, want %d", c.built, len(busy), len(busy))
	}
}

// An encoder holds a history of one window and a block, not two windows:
// the first page of 300 KB, on a codec of its own, allocates 3.5 MiB in
// all (the encoder's tables and history, the page written), where
// klauspost's default buffers take 4.5.
func TestEncoderHistoryIsOneWindow(t *testing.T) {
	base, _ := compress.GetCodec(compress.Codecs.Zstd)
	if own, ok := base.(*Codec); ok {
		base = own.base
	}
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	src := pages()["random"]
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.EncodeLevel(nil, src, 3)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("the first page of %d bytes allocated %.1f MiB, want at most 4", len(src), float64(n)/(1<<20))
	}
}

// Kept encoders go once the codec has been idle, and come back on use;
// the best-compression level is never kept.
func TestIdleEncodersAreDropped(t *testing.T) {
	base, _ := compress.GetCodec(compress.Codecs.Zstd)
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	c.idle = 20 * time.Millisecond
	src := pages()["text, 1MiB"]
	c.EncodeLevel(nil, src, 19)
	if c.kept() != 0 || c.built != 0 {
		t.Fatalf("best compression: kept %d, built %d; want arrow-go's encoders used", c.kept(), c.built)
	}
	c.EncodeLevel(nil, src, 3)
	if c.kept() != 1 {
		t.Fatalf("kept %d encoders after a page, want 1", c.kept())
	}
	for deadline := time.Now().Add(10 * time.Second); c.kept() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("kept encoders were not dropped after the codec went idle")
		}
	}
	c.EncodeLevel(nil, src, 3)
	if c.kept() != 1 || c.built != 2 {
		t.Fatalf("after idling: kept %d, built %d; want 1 and 2", c.kept(), c.built)
	}
}

// Pages compressed from many goroutines at once come out as arrow-go's.
func TestConcurrentPages(t *testing.T) {
	base, _ := compress.GetCodec(compress.Codecs.Zstd)
	c, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for name, src := range pages() {
		want := base.EncodeLevel(nil, src, 3)
		for range 4 {
			wg.Go(func() {
				for range 5 {
					if got := c.EncodeLevel(nil, src, 3); !bytes.Equal(got, want) {
						t.Errorf("%s: concurrent page differs from arrow-go's", name)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

func TestRegister(t *testing.T) {
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	if err := Register(); err != nil { // idempotent
		t.Fatal(err)
	}
	got, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := got.(*Codec)
	if !ok {
		t.Fatalf("registry holds %T", got)
	}
	if _, ok := c.base.(*Codec); ok {
		t.Fatal("registering twice wrapped the codec in itself")
	}
}
