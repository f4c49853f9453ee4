package main

import (
	"os"
	"path/filepath"
	"testing"
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
