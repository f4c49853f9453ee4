package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/offheap"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2 := write("v2", "536870912\n")
	unlimited := write("max", "max\n")
	v1unlimited := write("v1", "9223372036854771712\n")
	cases := []struct {
		files []string
		want  int64
	}{
		{[]string{v2}, 512 << 20},
		{[]string{unlimited, v1unlimited}, 0},
		{[]string{filepath.Join(dir, "missing"), v2}, 512 << 20},
		{nil, 0},
	}
	for _, c := range cases {
		if got := containerMemoryLimit(c.files); got != c.want {
			t.Errorf("containerMemoryLimit(%v) = %d, want %d", c.files, got, c.want)
		}
	}
}

// Under a soft memory limit, what the writers map off the heap comes off
// the limit, and goes back on when they free it.
func TestWriterAllocatorLowersTheSoftLimit(t *testing.T) {
	const limit = 1 << 30
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	a := writerAllocator(limit)
	b := a.Allocate(64 << 20)
	if got := debug.SetMemoryLimit(-1); got > limit-60<<20 || got < limit-72<<20 {
		t.Errorf("soft limit %d MiB with 64 MiB mapped; want about %d", got>>20, (limit-64<<20)>>20)
	}
	a.Free(b)
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("soft limit %d MiB after the buffer was freed; want %d", got>>20, limit>>20)
	}
	if a.Mapped() != 0 {
		t.Errorf("%d bytes still mapped", a.Mapped())
	}
}

// MAINTAINER_OFFHEAP_BUFFERS chooses where compaction's writers keep their
// buffers: off the Go heap by default and with "on"; with "off" there is no
// allocator, and the writers use the Go heap. Any other value is an error
// that names the variable.
func TestOffheapBuffersSwitch(t *testing.T) {
	cases := []struct {
		value   string
		offheap bool
		err     bool
	}{
		{"", true, false},
		{"on", true, false},
		{"off", false, false},
		{"OFF", false, false},
		{"no", false, true},
	}
	for _, tc := range cases {
		getenv := func(key string) string {
			if key == offheapEnv {
				return tc.value
			}
			return ""
		}
		alloc, err := writeBuffers(getenv, math.MaxInt64)
		switch {
		case tc.err:
			if err == nil || !strings.Contains(err.Error(), "MAINTAINER_OFFHEAP_BUFFERS") {
				t.Errorf("%q: error %v; want one naming the variable", tc.value, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case !tc.offheap:
			if alloc != nil {
				t.Errorf("%q: an allocator; want none (the Go heap)", tc.value)
			}
		case alloc == nil:
			t.Errorf("%q: no allocator; want off-heap buffers", tc.value)
		default:
			mem, reclaim := alloc()
			if _, ok := mem.(*offheap.Scope); !ok {
				t.Errorf("%q: writers allocate from %T; want an off-heap scope", tc.value, mem)
			}
			reclaim()
		}
	}
}

// With MAINTAINER_OFFHEAP_BUFFERS=off the binary compacts with its
// writers' buffers on the Go heap and keeps every row; a bad value stops it
// before anything runs (exit 2).
func TestOffheapBuffersOffEndToEnd(t *testing.T) {
	t.Setenv(offheapEnv, "off")
	d := filepath.Join(t.TempDir(), "demo")
	r := runMaintainer(t, "", "demo", "--dir", d, "--appends", "24", "--rows", "200", "--partitions", "3")
	expectCode(t, r, 0, "demo with MAINTAINER_OFFHEAP_BUFFERS=off")
	for _, want := range []string{"every row is unchanged", "24 data files became 3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Setenv(offheapEnv, "sometimes")
	r = runMaintainer(t, "", "version")
	expectCode(t, r, exitUsage, "version with MAINTAINER_OFFHEAP_BUFFERS=sometimes")
	if !strings.Contains(r.stderr, offheapEnv) {
		t.Errorf("the error does not name %s:\n%s", offheapEnv, r.stderr)
	}
}
