package maintenance

import "testing"

// Changed tells a task that failed before touching anything from one that
// failed part way: only the first may be reported as a dependency that was
// unreachable before any work (exit 3).
func TestOutcomeChanged(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Outcome
		want bool
	}{
		{"no report", Outcome{Status: StatusFailed}, false},
		{"compaction planned, nothing committed", Outcome{Compact: &CompactReport{FilesIn: 10}}, false},
		{"compaction committed a group", Outcome{Compact: &CompactReport{Commits: []int64{7}}}, true},
		{"expiry planned only", Outcome{Expire: &ExpireReport{FilesPlanned: 4}}, false},
		{"expiry committed", Outcome{Expire: &ExpireReport{SnapshotsExpired: 2}}, true},
		{"expiry deleted retried files", Outcome{Expire: &ExpireReport{FilesDeleted: 3}}, true},
		{"orphans found, none deleted", Outcome{Orphans: &OrphansReport{FilesFound: 5}}, false},
		{"orphans deleted some", Outcome{Orphans: &OrphansReport{FilesDeleted: 500}}, true},
	} {
		if got := c.o.Changed(); got != c.want {
			t.Errorf("%s: Changed() = %v, want %v", c.name, got, c.want)
		}
	}
}
