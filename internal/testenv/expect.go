package testenv

import "testing"

// EachFixture runs test as a parallel subtest of t for every fixture, with
// the fixture's expected values.
func EachFixture(t *testing.T, test func(t *testing.T, name string, want FixtureExpect)) {
	t.Helper()
	expected := Expected(t)
	for _, name := range FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, name, expected[name])
		})
	}
}

// ExpectSnapshotsRead reads every snapshot of the table at dir with the
// verifier and fails t unless each reads as want says (those unreadable in
// the fixture itself are skipped); current, a snapshot the test made, is the
// one snapshot want need not know.
func ExpectSnapshotsRead(t testing.TB, dir string, want FixtureExpect, current string) {
	t.Helper()
	for _, s := range VerifyAll(t, dir) {
		exp, ok := want.Snapshot(s.SnapshotID)
		switch {
		case !ok && s.SnapshotID != current:
			t.Fatalf("unknown snapshot %s", s.SnapshotID)
		case !ok || exp.Error != "":
			continue
		case s.Error != "" || s.LiveRows != exp.LiveRows || s.Checksum != exp.Checksum:
			t.Fatalf("snapshot %s: %d rows %s (err %q), expected %d rows %s", s.SnapshotID,
				s.LiveRows, s.Checksum, s.Error, exp.LiveRows, exp.Checksum)
		}
	}
}
