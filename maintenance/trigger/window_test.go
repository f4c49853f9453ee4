package trigger

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, wherever they run

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// at is a UTC time in the first week of June 2025: June 2 is a Monday.
func at(day, hour, minute int) time.Time {
	return time.Date(2025, 6, day, hour, minute, 0, 0, time.UTC)
}

func TestWindowContainsAndNextOpen(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		window string
		t      time.Time
		inside bool
		next   time.Time // when outside
	}{
		{"Mon-Fri 01:00-05:00", at(2, 1, 0), true, time.Time{}},   // opens at 01:00 sharp
		{"Mon-Fri 01:00-05:00", at(2, 4, 59), true, time.Time{}},  // still open
		{"Mon-Fri 01:00-05:00", at(2, 5, 0), false, at(3, 1, 0)},  // closed at 05:00, opens Tuesday
		{"Mon-Fri 01:00-05:00", at(2, 0, 59), false, at(2, 1, 0)}, // opens later today
		{"Mon-Fri 01:00-05:00", at(6, 12, 0), false, at(9, 1, 0)}, // Friday noon: next Monday
		{"Mon-Fri 01:00-05:00", at(7, 3, 0), false, at(9, 1, 0)},  // Saturday
		// Past midnight: opens Friday 22:00, closes Saturday 04:00.
		{"Fri 22:00-04:00", at(6, 23, 0), true, time.Time{}},
		{"Fri 22:00-04:00", at(7, 3, 59), true, time.Time{}},
		{"Fri 22:00-04:00", at(7, 4, 0), false, at(13, 22, 0)},
		{"Fri 22:00-04:00", at(6, 3, 0), false, at(6, 22, 0)}, // Friday early: Thursday's night is not listed
		{"22:00-04:00", at(3, 2, 0), true, time.Time{}},       // every night
		{"Sat,Sun 00:00-24:00", at(8, 23, 59), true, time.Time{}},
		{"Sat,Sun 00:00-24:00", at(9, 0, 0), false, at(14, 0, 0)},
		{"Fri-Mon 10:00-11:00", at(9, 10, 30), true, time.Time{}}, // the day range wraps past Sunday
		{"Fri-Mon 10:00-11:00", at(10, 10, 30), false, at(13, 10, 0)},
		// Two parts: weekday nights and all of Sunday.
		{"Mon-Fri 01:00-05:00; Sun 00:00-24:00", at(8, 12, 0), true, time.Time{}},
		{"Mon-Fri 01:00-05:00; Sun 00:00-24:00", at(7, 12, 0), false, at(8, 0, 0)},
		// Berlin is UTC+2 in June: 01:00-05:00 there is 23:00-03:00 UTC.
		{"Mon-Fri 01:00-05:00 Europe/Berlin", at(2, 23, 30), true, time.Time{}},
		{"Mon-Fri 01:00-05:00 Europe/Berlin", at(2, 3, 0), false, time.Date(2025, 6, 3, 1, 0, 0, 0, berlin)},
		{"mon-fri 01:00-05:00 UTC", at(2, 2, 0), true, time.Time{}},
		{"mon-fri 01:00-05:00 utc", at(2, 2, 0), true, time.Time{}},
	} {
		w, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatalf("ParseWindow(%q): %v", tc.window, err)
		}
		if got := w.Contains(tc.t); got != tc.inside {
			t.Errorf("%q contains %s = %v, want %v", tc.window, tc.t.Format(time.RFC1123), got, tc.inside)
		}
		want := tc.t
		if !tc.inside {
			want = tc.next
		}
		if got := w.NextOpen(tc.t); !got.Equal(want) {
			t.Errorf("%q next open after %s = %s, want %s", tc.window, tc.t.Format(time.RFC1123), got.Format(time.RFC1123), want.Format(time.RFC1123))
		}
	}
}

func TestParseWindowErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Mon-Fri", `"Mon-Fri": missing the hours, HH:MM-HH:MM`},
		{"Mon-Fri 1:00-05:00", `"Mon-Fri 1:00-05:00": time "1:00": want HH:MM from 00:00 to 23:59`},
		{"Mon-Fri 01:00-25:00", `"Mon-Fri 01:00-25:00": time "25:00": want HH:MM from 00:00 to 24:00`},
		{"24:00-05:00", `"24:00-05:00": time "24:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 05:00-05:00", `"Mon 05:00-05:00": hours "05:00-05:00" are an empty range; the whole day is 00:00-24:00`},
		{"Mon 05:00", `"Mon 05:00": hours "05:00": want HH:MM-HH:MM`},
		{"Mun 01:00-02:00", `"Mun 01:00-02:00": day "Mun": want Mon, Tue, Wed, Thu, Fri, Sat or Sun`},
		{"01:00-02:00 Mars/Olympus", `"01:00-02:00 Mars/Olympus": time zone "Mars/Olympus": unknown time zone Mars/Olympus`},
		{"01:00-02:00 Local", `"01:00-02:00 Local": time zone "Local" depends on the host; name the zone, e.g. Europe/Berlin`},
		{"01:00-02:00 UTC 03:00-04:00", `"01:00-02:00 UTC 03:00-04:00": unexpected "03:00-04:00" after the time zone; separate parts with ;`},
		{"01:00-02:00;", `empty part; write e.g. "Mon-Fri 01:00-05:00"`},
	} {
		_, err := ParseWindow(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseWindow(%q) = %v, want %s", tc.in, err, tc.want)
		}
	}
}

func TestValidateNamesWindow(t *testing.T) {
	err := Config{Window: "Mon-Fri 01:00"}.Validate()
	var fe *validate.FieldError
	if !errors.As(err, &fe) || fe.Field != "window" || !strings.Contains(fe.Msg, "want HH:MM-HH:MM") {
		t.Fatalf("Validate = %v; want a problem naming window", err)
	}
}

// Outside its window a task is not due whatever its counters say, and the
// reason says when the window opens; inside, the thresholds decide.
func TestDecideWindow(t *testing.T) {
	cfg := Config{CommitCount: 1, Window: "Mon-Fri 01:00-05:00"}
	st := State{LastRun: at(1, 0, 0), LastAttempt: at(1, 0, 0), SnapshotID: 1}
	d := Decide(cfg, st, Counters{Commits: 50}, at(2, 12, 0))
	if d.Due || d.Reason != "not due: outside window Mon-Fri 01:00-05:00, next opens at 2025-06-03 01:00 UTC (in 13h)" {
		t.Errorf("outside: %+v", d)
	}
	d = Decide(cfg, st, Counters{Commits: 50}, at(3, 2, 0))
	if !d.Due {
		t.Errorf("inside: %+v", d)
	}
	d = Decide(Config{Window: "Mon-Fri 01:00-05:00"}, st, Counters{}, at(3, 2, 0))
	if !d.Due || d.Reason != "due: no trigger configured" {
		t.Errorf("window alone, inside: %+v", d)
	}
	// A window nobody can read never lets the task run.
	d = Decide(Config{Window: "whenever"}, st, Counters{}, at(3, 2, 0))
	if d.Due || !strings.Contains(d.Reason, "does not parse") {
		t.Errorf("bad window: %+v", d)
	}
}

func TestNextAllowed(t *testing.T) {
	win := "Mon-Fri 01:00-05:00"
	st := State{LastAttempt: at(3, 1, 0), LastRun: at(3, 1, 0)}
	for _, tc := range []struct {
		name string
		cfg  Config
		now  time.Time
		want time.Time
	}{
		{"inside, no rate limit", Config{Window: win}, at(3, 2, 0), time.Time{}},
		{"outside: the window's opening", Config{Window: win}, at(3, 6, 0), at(4, 1, 0)},
		{"rate limit ends inside the window", Config{Window: win, RateLimit: 2 * time.Hour}, at(3, 1, 30), at(3, 3, 0)},
		{"rate limit ends after the window closed", Config{Window: win, RateLimit: 5 * time.Hour}, at(3, 1, 30), at(4, 1, 0)},
		{"rate limit alone", Config{RateLimit: time.Hour}, at(3, 1, 30), at(3, 2, 0)},
		{"neither", Config{}, at(3, 1, 30), time.Time{}},
	} {
		if got := NextAllowed(tc.cfg, st, tc.now); !got.Equal(tc.want) {
			t.Errorf("%s: NextAllowed = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestWindowNextOpenDST: a start that a spring-forward night skips opens the
// window when the gap ends, and a part lying wholly in the gap does not
// open that day; NextOpen is always a moment inside the window, so a held
// request queued then is not refused as outside it.
func TestWindowNextOpenDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// Berlin skips 02:00-03:00 on 2026-03-29 (01:00 UTC) and repeats
	// 02:00-03:00 on 2025-10-26 (01:00 UTC).
	spring := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC) // 01:00 CET
	for _, tc := range []struct {
		window string
		t      time.Time
		next   time.Time
	}{
		{"02:30-03:30 Europe/Berlin", spring, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},     // 03:00 CEST
		{"Sun 02:30-04:00 Europe/Berlin", spring, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)}, // 03:00 CEST
		{"Sun 02:00-02:30 Europe/Berlin", spring, time.Date(2026, 4, 5, 2, 0, 0, 0, berlin)},    // none that Sunday
		{"Sat-Sun 02:15-02:45 Europe/Berlin; Sun 05:00-06:00 Europe/Berlin", spring, time.Date(2026, 3, 29, 5, 0, 0, 0, berlin)},
		{"01:00-05:00 Europe/Berlin", time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)},
		// Autumn: the start exists twice (CEST, then CET); the first opens.
		{"02:30-03:30 Europe/Berlin", time.Date(2025, 10, 25, 22, 0, 0, 0, time.UTC), time.Date(2025, 10, 26, 0, 30, 0, 0, time.UTC)},
		// A t between whole minutes: the start is still found.
		{"02:30-03:30", time.Date(2025, 10, 27, 0, 59, 30, 5, time.UTC), time.Date(2025, 10, 27, 2, 30, 0, 0, time.UTC)},
		{"02:30-03:30", time.Date(2025, 10, 27, 2, 29, 59, 0, time.UTC), time.Date(2025, 10, 27, 2, 30, 0, 0, time.UTC)},
	} {
		w, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatalf("ParseWindow(%q): %v", tc.window, err)
		}
		if w.Contains(tc.t) {
			t.Fatalf("%q contains %s; the case wants it outside", tc.window, tc.t)
		}
		got := w.NextOpen(tc.t)
		if !got.Equal(tc.next) {
			t.Errorf("%q next open after %s = %s, want %s", tc.window, tc.t.In(berlin).Format(time.RFC1123), got.In(berlin).Format(time.RFC1123), tc.next.In(berlin).Format(time.RFC1123))
		}
		if !w.Contains(got) {
			t.Errorf("%q next open after %s = %s is outside the window", tc.window, tc.t, got.In(berlin).Format(time.RFC1123))
		}
	}
}
