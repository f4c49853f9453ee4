package procstat

import (
	"os"
	"runtime"
	"testing"
)

func TestBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	rss, ok := Bytes(Self, "VmRSS")
	hwm, ok2 := Bytes(os.Getpid(), "VmHWM")
	if !ok || !ok2 || rss < 1<<20 || hwm < rss {
		t.Fatalf("VmRSS %d (%v), VmHWM %d (%v); want a resident set of at least 1 MiB and a peak above it", rss, ok, hwm, ok2)
	}
	if _, ok := Bytes(Self, "NoSuchField"); ok {
		t.Error("an absent field read as present")
	}
}
