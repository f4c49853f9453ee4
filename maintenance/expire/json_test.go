package expire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Ages are written in the config's form and read back into their types.
func TestJSONAgesReadBack(t *testing.T) {
	p := Policy{RetainLast: 3, RetainLastSource: SourceConfig, MaxSnapshotAge: 5 * 24 * time.Hour,
		MaxSnapshotAgeSource: SourceConfig, MaxRefAge: 36 * time.Hour, MaxRefAgeSource: SourceDefault}
	r := RemovedRef{Name: "audit", Type: "tag", SnapshotID: 7, Age: 90 * time.Second, MaxRefAge: time.Hour, Reason: "old"}
	for _, tc := range []struct {
		v, back any
		want    []string
	}{
		{p, &Policy{}, []string{`"max_snapshot_age":"5d"`, `"max_ref_age":"1d12h"`, `"retain_last":3`}},
		{r, &RemovedRef{}, []string{`"age":"1m30s"`, `"max_ref_age":"1h"`, `"name":"audit"`}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %s", b, w)
			}
		}
		if err := json.Unmarshal(b, tc.back); err != nil {
			t.Fatalf("read back %s: %v", b, err)
		}
		var got any
		switch back := tc.back.(type) {
		case *Policy:
			got = *back
		case *RemovedRef:
			got = *back
		}
		if got != tc.v {
			t.Errorf("read back %s as %+v; want %+v", b, got, tc.v)
		}
	}
}
