package outputcheck

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []string // substrings of the problems, in path order
	}{
		{`{"groups": [], "age": "5d", "modified": "2026-03-01T12:00:00Z", "size_bytes": 12, "duration_seconds": 1.5}`, nil},
		{`{"groups": null}`, []string{"groups: a list must be an array", "groups: null"}},
		{`{"groups": {}}`, []string{"groups: a list must be an array"}},
		{`{"policy": {"max_snapshot_age": 432000000000000}}`, []string{"policy.max_snapshot_age: a number needs its unit"}},
		{`{"age": "96h0m0s x"}`, []string{"age: duration"}},
		{`{"cutoff": "2026-03-01 12:00:00Z"}`, []string{"cutoff: timestamp"}},
		{`{"x": [{"finished": "2026-03-01 12:00"}]}`, []string{"x[0].finished: timestamp"}},
		{`{"target_file_size": 5}`, []string{"target_file_size: a size needs"}},
		{`{"bytes_in": "1.2 MiB"}`, []string{"bytes_in: size"}},
		{`{"timestamp": 1700000000000}`, []string{"timestamp: a number needs its unit"}},
		{`{"timestamp_ms": 1700000000000}`, nil},
	} {
		got, err := Check([]byte(tc.doc), "groups")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], tc.want[i])
		}
		if !ok {
			t.Errorf("Check(%s) = %q; want %q", tc.doc, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	got, err := Missing([]byte(`{"compact": {"groups": []}, "queue": []}`), "compact.groups", "compact.partitions", "queue", "recent")
	if err != nil || !slices.Equal(got, []string{"compact.partitions", "recent"}) {
		t.Errorf("Missing = %q, %v", got, err)
	}
}
