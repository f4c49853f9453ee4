package trigger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is when a task may run: one or more weekly ranges of wall-clock
// time in a time zone, written as the trigger's window key:
//
//	window  := part { ";" part }
//	part    := [days] HH:MM "-" HH:MM [zone]
//	days    := day ["-" day] { "," day ["-" day] }   (Mon..Sun; Fri-Mon wraps)
//	zone    := an IANA name (Europe/Berlin) or UTC, the default
//
// for example "Mon-Fri 01:00-05:00", "Sat,Sun 00:00-24:00 Europe/Berlin",
// "22:00-04:00" (every night). A range whose end is before its start runs
// past midnight: it opens on a listed day and closes on the next. Without
// days, every day is listed. A time is in the window when it is in any part.
type Window struct {
	parts []windowPart
}

type windowPart struct {
	days       [7]bool // by time.Weekday
	start, end int     // minutes after midnight; end may be 1440
	loc        *time.Location
}

// ParseWindow parses the window syntax; the error says what is wrong with
// which part.
func ParseWindow(s string) (Window, error) {
	var w Window
	for raw := range strings.SplitSeq(s, ";") {
		part := strings.TrimSpace(raw)
		if part == "" {
			return Window{}, errors.New(`empty part; write e.g. "Mon-Fri 01:00-05:00"`)
		}
		p, err := parseWindowPart(part)
		if err != nil {
			return Window{}, fmt.Errorf("%q: %w", part, err)
		}
		w.parts = append(w.parts, p)
	}
	return w, nil
}

func parseWindowPart(s string) (windowPart, error) {
	fields := strings.Fields(s)
	p := windowPart{loc: time.UTC}
	i := 0
	if len(fields) > 0 && !strings.Contains(fields[0], ":") {
		days, err := parseDays(fields[0])
		if err != nil {
			return p, err
		}
		p.days, i = days, 1
	} else {
		for d := range p.days {
			p.days[d] = true
		}
	}
	if i >= len(fields) {
		return p, errors.New("missing the hours, HH:MM-HH:MM")
	}
	from, to, ok := strings.Cut(fields[i], "-")
	if !ok {
		return p, fmt.Errorf("hours %q: want HH:MM-HH:MM", fields[i])
	}
	var err error
	if p.start, err = parseClock(from, false); err != nil {
		return p, err
	}
	if p.end, err = parseClock(to, true); err != nil {
		return p, err
	}
	if p.start == p.end {
		return p, fmt.Errorf("hours %q are an empty range; the whole day is 00:00-24:00", fields[i])
	}
	i++
	if i < len(fields) {
		name := fields[i]
		if name == "Local" {
			return p, errors.New(`time zone "Local" depends on the host; name the zone, e.g. Europe/Berlin`)
		}
		if !strings.EqualFold(name, "UTC") { // utc, as days are in any case
			loc, err := time.LoadLocation(name)
			if err != nil {
				return p, fmt.Errorf("time zone %q: %w", name, err)
			}
			p.loc = loc
		}
		i++
	}
	if i < len(fields) {
		return p, fmt.Errorf("unexpected %q after the time zone; separate parts with ;", fields[i])
	}
	return p, nil
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

func parseDay(s string) (time.Weekday, error) {
	if d, ok := weekdays[strings.ToLower(s)]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("day %q: want Mon, Tue, Wed, Thu, Fri, Sat or Sun", s)
}

// parseDays reads "Mon-Fri", "Sat,Sun", "Mon,Wed-Fri"; a range past Sunday
// wraps (Fri-Mon).
func parseDays(s string) ([7]bool, error) {
	var days [7]bool
	for item := range strings.SplitSeq(s, ",") {
		from, to, isRange := strings.Cut(item, "-")
		a, err := parseDay(from)
		if err != nil {
			return days, err
		}
		b := a
		if isRange {
			if b, err = parseDay(to); err != nil {
				return days, err
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			days[d] = true
			if d == b {
				break
			}
		}
	}
	return days, nil
}

// parseClock reads HH:MM as minutes after midnight; 24:00 only as an end.
func parseClock(s string, isEnd bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, herr := strconv.Atoi(hh)
	m, merr := strconv.Atoi(mm)
	if !ok || herr != nil || merr != nil || len(hh) != 2 || len(mm) != 2 || m > 59 || h > 24 || (h == 24 && (m != 0 || !isEnd)) {
		want := "HH:MM from 00:00 to 23:59"
		if isEnd {
			want = "HH:MM from 00:00 to 24:00"
		}
		return 0, fmt.Errorf("time %q: want %s", s, want)
	}
	return h*60 + m, nil
}

// Contains reports whether t is inside the window.
func (w Window) Contains(t time.Time) bool {
	for _, p := range w.parts {
		if p.contains(t) {
			return true
		}
	}
	return false
}

func (p windowPart) contains(t time.Time) bool {
	lt := t.In(p.loc)
	m := lt.Hour()*60 + lt.Minute()
	d := lt.Weekday()
	if p.start < p.end {
		return p.days[d] && m >= p.start && m < p.end
	}
	// Past midnight: opened today, or opened yesterday and not yet closed.
	return (p.days[d] && m >= p.start) || (p.days[(d+6)%7] && m < p.end)
}

// NextOpen is the first moment at or after t inside the window: t itself
// when it is inside.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Contains(t) {
		return t
	}
	var next time.Time
	for _, p := range w.parts {
		lt := t.In(p.loc)
		// Within 8 days every listed day has come once.
		for off := 0; off <= 8; off++ {
			c := time.Date(lt.Year(), lt.Month(), lt.Day()+off, p.start/60, p.start%60, 0, 0, p.loc)
			if !c.After(t) || !p.days[c.Weekday()] {
				continue
			}
			var ok bool
			if c, ok = p.opening(c, t); !ok {
				continue
			}
			if next.IsZero() || c.Before(next) {
				next = c
			}
			break
		}
	}
	return next
}

// opening is when the part opens on the day of c, its start as time.Date
// made it, at or after t: the first moment inside the part in the DST gap
// before c. A start that a spring-forward night skips (02:30 in
// Europe/Berlin) does not exist, and time.Date moves it past the gap, so
// the part opens at the gap's end (03:00), or not at all that day when it
// lies wholly in the gap (false); a start that an autumn night repeats is
// made the second time, and the part opens the first.
func (p windowPart) opening(c, t time.Time) (time.Time, bool) {
	// Whole minutes, as the part is written (c is one); t is outside, and
	// so is the rest of its minute.
	for x := c.Add(-maxDSTGap).Truncate(time.Minute); !x.After(c); x = x.Add(time.Minute) {
		if !x.Before(t) && p.contains(x) {
			return x, true
		}
	}
	return time.Time{}, false
}

// maxDSTGap bounds the wall-clock time a zone skips at once (an hour in
// most zones, two at most in the tz database's history).
const maxDSTGap = 2 * time.Hour

// windowClosed reports whether cfg's window keeps the task from running at
// now, with the reason "plan" and the logs show.
func windowClosed(cfg Config, now time.Time) (string, bool) {
	if cfg.Window == "" {
		return "", false
	}
	w, err := ParseWindow(cfg.Window)
	if err != nil {
		// Validate refuses this; never run on a window nobody can read.
		return fmt.Sprintf("not due: window %q does not parse: %v", cfg.Window, err), true
	}
	if w.Contains(now) {
		return "", false
	}
	next := w.NextOpen(now)
	return fmt.Sprintf("not due: outside window %s, next opens at %s (in %s)",
		cfg.Window, next.Format("2006-01-02 15:04 MST"), formatDuration(next.Sub(now))), true
}

// WindowStatus says where now stands against cfg's window, for status:
// "outside window ..., next opens at ..." or "inside window ..."; "" when
// the task has no window.
func WindowStatus(cfg Config, now time.Time) string {
	if cfg.Window == "" {
		return ""
	}
	if reason, closed := windowClosed(cfg, now); closed {
		return strings.TrimPrefix(reason, "not due: ")
	}
	return "inside window " + cfg.Window
}

// NextAllowed is when a requested run of the task may go ahead after now:
// once cfg's rate limit (after the attempt recorded in st) has passed and
// its window is open. Zero when it may go ahead now.
func NextAllowed(cfg Config, st State, now time.Time) time.Time {
	at := now
	if until := HeldUntil(cfg, st); until.After(at) {
		at = until
	}
	if cfg.Window != "" {
		if w, err := ParseWindow(cfg.Window); err == nil {
			at = w.NextOpen(at)
		}
	}
	if !at.After(now) {
		return time.Time{}
	}
	return at
}
