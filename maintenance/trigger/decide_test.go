package trigger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func TestDecide(t *testing.T) {
	ran := func(d time.Duration) State { return State{LastRun: ago(d), LastAttempt: ago(d), SnapshotID: 1} }
	failedAfter := func(run, attempt time.Duration) State {
		return State{LastRun: ago(run), LastAttempt: ago(attempt), SnapshotID: 1}
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		cfg    Config
		st     State
		c      Counters
		due    bool
		reason string
	}{
		{"empty config", Config{}, ran(time.Minute), Counters{}, true,
			"due: no trigger configured"},
		{"empty config never run", Config{}, State{}, Counters{FromCreation: true}, true,
			"due: no trigger configured"},
		{"empty config rate limited", Config{RateLimit: 10 * time.Minute}, ran(2 * time.Minute), Counters{}, false,
			"not due: rate limited, last attempt 2m ago (rate_limit 10m)"},

		{"commits met", Config{CommitCount: 10}, ran(time.Hour), Counters{Commits: 12}, true,
			"due: 12 commits since last run (commit_count 10)"},
		{"commits exactly met", Config{CommitCount: 10}, ran(time.Hour), Counters{Commits: 10}, true,
			"due: 10 commits since last run (commit_count 10)"},
		{"commits short", Config{CommitCount: 10}, ran(time.Hour), Counters{Commits: 3}, false,
			"not due: 3/10 commits"},
		{"one commit", Config{CommitCount: 1}, ran(time.Hour), Counters{Commits: 1}, true,
			"due: 1 commit since last run (commit_count 1)"},
		{"commits since creation", Config{CommitCount: 10}, State{}, Counters{Commits: 40, FromCreation: true}, true,
			"due: 40 commits since creation (commit_count 10)"},
		{"never run below thresholds", Config{CommitCount: 10}, State{}, Counters{Commits: 2, FromCreation: true}, false,
			"not due: 2/10 commits"},

		{"data files met", Config{DataFileCount: 30}, ran(time.Hour), Counters{DataFiles: 40}, true,
			"due: 40 data files added (data_file_count 30)"},
		{"data files short", Config{DataFileCount: 30}, ran(time.Hour), Counters{DataFiles: 4}, false,
			"not due: 4/30 data files"},
		{"bytes met", Config{DataFileBytes: 128 * mib}, ran(time.Hour), Counters{DataBytes: 130 * mib}, true,
			"due: 130 MiB added (data_file_bytes 128 MiB)"},
		{"bytes short", Config{DataFileBytes: 128 * mib}, ran(time.Hour), Counters{DataBytes: 1258291}, false,
			"not due: 1.2 MiB/128 MiB added"},
		{"delete files met", Config{DeleteFileCount: 5}, ran(time.Hour), Counters{DeleteFiles: 6}, true,
			"due: 6 delete files added (delete_file_count 5)"},
		{"one delete file", Config{DeleteFileCount: 1}, ran(time.Hour), Counters{DeleteFiles: 1}, true,
			"due: 1 delete file added (delete_file_count 1)"},
		{"delete files short", Config{DeleteFileCount: 5}, ran(time.Hour), Counters{}, false,
			"not due: 0/5 delete files"},
		{"position delete files met", Config{PositionDeleteFileCount: 3}, ran(time.Hour), Counters{PositionDeleteFiles: 3, EqualityDeleteFiles: 9}, true,
			"due: 3 position-delete files added (position_delete_file_count 3)"},
		{"position deletes met", Config{PositionDeleteRecordCount: 1000}, ran(time.Hour), Counters{PositionDeleteRecords: 1500}, true,
			"due: 1500 position deletes added (position_delete_record_count 1000)"},
		{"equality delete files met", Config{EqualityDeleteFileCount: 1}, ran(time.Hour), Counters{EqualityDeleteFiles: 1}, true,
			"due: 1 equality-delete file added (equality_delete_file_count 1)"},
		{"equality deletes met", Config{EqualityDeleteRecordCount: 10}, ran(time.Hour), Counters{EqualityDeleteRecords: 10}, true,
			"due: 10 equality deletes added (equality_delete_record_count 10)"},
		{"kinds apart: equality deletes do not make position thresholds", Config{PositionDeleteFileCount: 2, PositionDeleteRecordCount: 5},
			ran(time.Hour), Counters{DeleteFiles: 40, EqualityDeleteFiles: 40, EqualityDeleteRecords: 400, PositionDeleteRecords: 4}, false,
			"not due: 0/2 position-delete files, 4/5 position deletes"},
		{"kinds short", Config{EqualityDeleteFileCount: 5, EqualityDeleteRecordCount: 100}, ran(time.Hour),
			Counters{EqualityDeleteFiles: 2, EqualityDeleteRecords: 30}, false,
			"not due: 2/5 equality-delete files, 30/100 equality deletes"},

		{"interval never run", Config{Interval: time.Hour}, State{}, Counters{FromCreation: true}, true,
			"due: never run (interval 1h)"},
		{"interval elapsed", Config{Interval: time.Hour}, ran(2 * time.Hour), Counters{}, true,
			"due: last run 2h ago (interval 1h)"},
		{"interval exactly elapsed", Config{Interval: time.Hour}, ran(time.Hour), Counters{}, true,
			"due: last run 1h ago (interval 1h)"},
		{"interval pending", Config{Interval: time.Hour}, ran(20 * time.Minute), Counters{}, false,
			"not due: next interval run in 40m"},
		{"interval counts from the last completed run, not a failed attempt",
			Config{Interval: time.Hour}, failedAfter(3*time.Hour, 5*time.Minute), Counters{}, true,
			"due: last run 3h ago (interval 1h)"},
		{"never completed, attempted", Config{Interval: time.Hour}, State{LastAttempt: ago(time.Minute)}, Counters{}, true,
			"due: never run (interval 1h)"},

		{"all thresholds met are listed", Config{CommitCount: 10, DataFileCount: 10, DataFileBytes: mib, DeleteFileCount: 2, Interval: time.Hour},
			ran(90 * time.Minute), Counters{Commits: 12, DataFiles: 12, DataBytes: 2 * mib, DeleteFiles: 3}, true,
			"due: 12 commits since last run (commit_count 10); 12 data files added (data_file_count 10); " +
				"2 MiB added (data_file_bytes 1 MiB); 3 delete files added (delete_file_count 2); last run 1h30m ago (interval 1h)"},
		{"one of several met", Config{CommitCount: 10, DataFileBytes: 128 * mib, Interval: 24 * time.Hour},
			ran(time.Hour), Counters{Commits: 3, DataBytes: 200 * mib}, true,
			"due: 200 MiB added (data_file_bytes 128 MiB)"},
		{"none of several met", Config{CommitCount: 10, DataFileBytes: 128 * mib, Interval: time.Hour},
			ran(20 * time.Minute), Counters{Commits: 3, DataBytes: 1258291}, false,
			"not due: 3/10 commits, 1.2 MiB/128 MiB added; next interval run in 40m"},
		{"interval alone makes it due", Config{CommitCount: 10, Interval: time.Hour},
			ran(26 * time.Hour), Counters{Commits: 1}, true,
			"due: last run 1d2h ago (interval 1h)"},

		{"rate limit beats thresholds", Config{CommitCount: 10, RateLimit: 10 * time.Minute},
			ran(2 * time.Minute), Counters{Commits: 500}, false,
			"not due: rate limited, last attempt 2m ago (rate_limit 10m)"},
		{"rate limit beats never run", Config{Interval: time.Hour, RateLimit: 10 * time.Minute},
			State{LastAttempt: ago(30 * time.Second)}, Counters{FromCreation: true}, false,
			"not due: rate limited, last attempt 30s ago (rate_limit 10m)"},
		{"rate limit spaces retries of a failing task", Config{CommitCount: 10, RateLimit: time.Hour},
			failedAfter(5*time.Hour, 20*time.Minute), Counters{Commits: 50}, false,
			"not due: rate limited, last attempt 20m ago (rate_limit 1h)"},
		{"rate limit passed", Config{CommitCount: 10, RateLimit: 10 * time.Minute},
			ran(10 * time.Minute), Counters{Commits: 12}, true,
			"due: 12 commits since last run (commit_count 10)"},
		{"rate limit from last run when no attempt recorded", Config{CommitCount: 1, RateLimit: time.Hour},
			State{LastRun: ago(time.Minute), SnapshotID: 1}, Counters{Commits: 3}, false,
			"not due: rate limited, last attempt 1m ago (rate_limit 1h)"},
		{"rate limit with attempt in the future (clock skew)", Config{CommitCount: 1, RateLimit: time.Hour},
			State{LastAttempt: now.Add(time.Minute)}, Counters{Commits: 3}, false,
			"not due: rate limited, last attempt 0s ago (rate_limit 1h)"},

		{"failed deletes to retry", Config{CommitCount: 10, Interval: time.Hour},
			State{LastRun: ago(time.Minute), SnapshotID: 1, Retry: &Retry{Paths: []string{"s3://b/t/a.parquet", "s3://b/t/b.parquet"}}},
			Counters{Commits: 3}, true, "due: 2 failed deletes to retry"},
		{"failed deletes wait for the rate limit", Config{CommitCount: 10, RateLimit: time.Hour},
			State{LastAttempt: ago(time.Minute), Retry: &Retry{Paths: []string{"s3://b/t/a.parquet"}}},
			Counters{}, false, "not due: rate limited, last attempt 1m ago (rate_limit 1h)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.cfg, tc.st, tc.c, now)
			if d.Due != tc.due || d.Reason != tc.reason {
				t.Fatalf("Decide = (%v, %q)\n          want (%v, %q)", d.Due, d.Reason, tc.due, tc.reason)
			}
			if d.Counters != tc.c {
				t.Fatalf("counters %+v, want %+v", d.Counters, tc.c)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                          "0s",
		0:                                     "0s",
		300 * time.Millisecond:                "300ms",
		45 * time.Second:                      "45s",
		59*time.Second + 600*time.Millisecond: "1m",
		10 * time.Minute:                      "10m",
		40*time.Minute + 20*time.Second:       "40m",
		time.Hour:                             "1h",
		90 * time.Minute:                      "1h30m",
		23*time.Hour + 59*time.Minute + 50*time.Second: "1d",
		24 * time.Hour:     "1d",
		36 * time.Hour:     "1d12h",
		7 * 24 * time.Hour: "7d",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:         "0 B",
		1023:      "1023 B",
		1024:      "1 KiB",
		1536:      "1.5 KiB",
		1258291:   "1.2 MiB",
		128 << 20: "128 MiB",
		512 << 30: "512 GiB",
		3 << 40:   "3 TiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	valid := []Config{
		{},
		{CommitCount: 10, DataFileCount: 100, DataFileBytes: 1 << 30, DeleteFileCount: 5, Interval: time.Hour, RateLimit: time.Minute},
		{RateLimit: 2 * time.Hour, Interval: time.Hour},
	}
	for _, c := range valid {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}

	bad := Config{CommitCount: -1, DataFileCount: -2, DataFileBytes: -3, DeleteFileCount: -4, Interval: -time.Second, RateLimit: -time.Minute}
	before := bad
	err := bad.Validate()
	if bad != before {
		t.Fatal("Validate changed the config")
	}
	fields := map[string]any{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *validate.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v is not a FieldError", e)
		}
		if !strings.Contains(fe.Msg, "negative") {
			t.Errorf("%s: message %q", fe.Field, fe.Msg)
		}
		fields[fe.Field] = fe.Value
	}
	want := map[string]any{
		"commit_count": -1, "data_file_count": -2, "data_file_bytes": int64(-3), "delete_file_count": -4,
		"interval": -time.Second, "rate_limit": -time.Minute,
	}
	if len(fields) != len(want) {
		t.Fatalf("problems with %v, want all of %v", fields, want)
	}
	for f, v := range want {
		if fields[f] != v {
			t.Errorf("%s: value %v (%T), want %v (%T)", f, fields[f], fields[f], v, v)
		}
	}
}

func TestConfigValidateDeleteKinds(t *testing.T) {
	bad := Config{PositionDeleteFileCount: -1, PositionDeleteRecordCount: -2, EqualityDeleteFileCount: -3, EqualityDeleteRecordCount: -4}
	err := bad.Validate()
	if err == nil {
		t.Fatal("negative per-kind thresholds accepted")
	}
	for _, f := range []string{"position_delete_file_count", "position_delete_record_count", "equality_delete_file_count", "equality_delete_record_count"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("problems %q do not name %s", err, f)
		}
	}
	if err := (Config{PositionDeleteFileCount: 1, PositionDeleteRecordCount: 1, EqualityDeleteFileCount: 1, EqualityDeleteRecordCount: 1}).Validate(); err != nil {
		t.Fatalf("valid per-kind thresholds: %v", err)
	}
}

func TestConfigEmpty(t *testing.T) {
	for c, want := range map[Config]bool{
		{}:                                  true,
		{RateLimit: time.Hour}:              true,
		{CommitCount: 1}:                    false,
		{DataFileCount: 1}:                  false,
		{DataFileBytes: 1}:                  false,
		{DeleteFileCount: 1}:                false,
		{PositionDeleteFileCount: 1}:        false,
		{PositionDeleteRecordCount: 1}:      false,
		{EqualityDeleteFileCount: 1}:        false,
		{EqualityDeleteRecordCount: 1}:      false,
		{Interval: time.Hour}:               false,
		{Interval: time.Hour, RateLimit: 1}: false,
	} {
		if got := c.Empty(); got != want {
			t.Errorf("%+v.Empty() = %v, want %v", c, got, want)
		}
	}
}

func TestRecord(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	m := Mark{SnapshotID: 7, SequenceNumber: 3, TimestampMs: 1234, TableUUID: "u"}
	prev := State{LastRun: ago(time.Hour), LastAttempt: ago(time.Hour), SnapshotID: 5, SequenceNumber: 2, TimestampMs: 1000, TableUUID: "u", LastError: "old"}

	ok := Record(prev, m, start, "succeeded", nil, true)
	want := State{LastRun: start.UTC(), LastAttempt: start.UTC(), SnapshotID: 7, SequenceNumber: 3, TimestampMs: 1234, TableUUID: "u", LastResult: "succeeded"}
	if ok != want {
		t.Fatalf("after success: %+v\nwant %+v", ok, want)
	}

	failed := Record(prev, m, start, "failed", errors.New("commit conflict"), false)
	want = prev
	want.LastAttempt, want.LastResult, want.LastError = start.UTC(), "failed", "commit conflict"
	if failed != want {
		t.Fatalf("after failure: %+v\nwant %+v", failed, want)
	}

	// The rate limit holds from the failed attempt on.
	if d := Decide(Config{CommitCount: 1, RateLimit: time.Minute}, failed, Counters{Commits: 9}, start.Add(time.Second)); d.Due {
		t.Fatalf("due right after an attempt: %s", d.Reason)
	}
}
