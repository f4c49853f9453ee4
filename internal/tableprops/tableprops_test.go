package tableprops

import (
	"testing"

	"github.com/apache/iceberg-go"
)

func TestGCAllowed(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "TRUE": true, " True ": true,
		"false": false, "1": false, "t": false, "yes": false, "": false, "ture": false} {
		if got := GCAllowed(iceberg.Properties{GCEnabled: v}); got != want {
			t.Errorf("gc.enabled=%q: %v; want %v", v, got, want)
		}
	}
	if !GCAllowed(iceberg.Properties{}) {
		t.Error("absent gc.enabled must allow GC")
	}
}
