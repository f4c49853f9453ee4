package gen

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

func init() {
	if os.Getenv("GEN_HEAP_AT") == "" {
		return
	}
	d, _ := time.ParseDuration(os.Getenv("GEN_HEAP_AT"))
	go func() {
		time.Sleep(d)
		runtime.GC()
		f, _ := os.Create("/tmp/heapmid.prof")
		pprof.WriteHeapProfile(f)
		f.Close()
	}()
}
