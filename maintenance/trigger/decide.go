package trigger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Decision says whether a task is due, and why in words a user reads in
// `plan` and the logs.
type Decision struct {
	Due      bool
	Reason   string
	Counters Counters
}

// Decide applies cfg to the counters c of what writers did since st. It is
// pure: now is injected. The window is checked first, then the rate limit
// (outside the window or rate limited means not due whatever the counters
// say); then every threshold met, and the interval, are listed. A forced
// run does not ask.
func Decide(cfg Config, st State, c Counters, now time.Time) Decision {
	d := Decision{Counters: c}
	if reason, closed := windowClosed(cfg, now); closed {
		d.Reason = reason
		return d
	}
	if reason, limited := rateLimit(cfg, st, now); limited {
		d.Reason = reason
		return d
	}
	if cfg.Empty() {
		d.Due, d.Reason = true, "due: no trigger configured"
		return d
	}

	since := "since last run"
	if c.FromCreation {
		since = "since creation"
	}
	var met, short []string
	if n := cfg.CommitCount; n > 0 {
		if c.Commits >= n {
			met = append(met, fmt.Sprintf("%s %s (commit_count %d)", plural(c.Commits, "commit"), since, n))
		} else {
			short = append(short, fmt.Sprintf("%d/%d commits", c.Commits, n))
		}
	}
	if n := cfg.DataFileCount; n > 0 {
		if c.DataFiles >= n {
			met = append(met, fmt.Sprintf("%s added (data_file_count %d)", plural(c.DataFiles, "data file"), n))
		} else {
			short = append(short, fmt.Sprintf("%d/%d data files", c.DataFiles, n))
		}
	}
	if n := cfg.DataFileBytes; n > 0 {
		if c.DataBytes >= n {
			met = append(met, fmt.Sprintf("%s added (data_file_bytes %s)", formatBytes(c.DataBytes), formatBytes(n)))
		} else {
			short = append(short, fmt.Sprintf("%s/%s added", formatBytes(c.DataBytes), formatBytes(n)))
		}
	}
	if n := cfg.DeleteFileCount; n > 0 {
		if c.DeleteFiles >= n {
			met = append(met, fmt.Sprintf("%s added (delete_file_count %d)", plural(c.DeleteFiles, "delete file"), n))
		} else {
			short = append(short, fmt.Sprintf("%d/%d delete files", c.DeleteFiles, n))
		}
	}
	var next string
	if iv := cfg.Interval; iv > 0 {
		switch ago := now.Sub(st.LastRun); {
		case st.LastRun.IsZero():
			met = append(met, fmt.Sprintf("never run (interval %s)", formatDuration(iv)))
		case ago >= iv:
			met = append(met, fmt.Sprintf("last run %s ago (interval %s)", formatDuration(ago), formatDuration(iv)))
		default:
			next = "next interval run in " + formatDuration(iv-ago)
		}
	}

	if st.Retry != nil && len(st.Retry.Paths) > 0 {
		// Unreferenced files that a failed run left: retried first thing.
		met = append(met, plural(len(st.Retry.Paths), "failed delete")+" to retry")
	}
	if len(met) > 0 {
		d.Due, d.Reason = true, "due: "+strings.Join(met, "; ")
		return d
	}
	parts := strings.Join(short, ", ")
	if next != "" {
		if parts != "" {
			parts += "; "
		}
		parts += next
	}
	d.Reason = "not due: " + parts
	return d
}

// HeldUntil is when cfg's rate limit lets the task run again after the
// attempt recorded in st; zero when there is no rate limit or no attempt.
// A forced run is not held.
func HeldUntil(cfg Config, st State) time.Time {
	last := st.LastAttempt
	if st.LastRun.After(last) {
		last = st.LastRun // a State saved without LastAttempt
	}
	if cfg.RateLimit <= 0 || last.IsZero() {
		return time.Time{}
	}
	return last.Add(cfg.RateLimit)
}

// rateLimit reports whether the rate limit holds the task back at now.
func rateLimit(cfg Config, st State, now time.Time) (string, bool) {
	until := HeldUntil(cfg, st)
	if until.IsZero() || !now.Before(until) {
		return "", false
	}
	ago := now.Sub(until.Add(-cfg.RateLimit))
	return fmt.Sprintf("not due: rate limited, last attempt %s ago (rate_limit %s)",
		formatDuration(ago), formatDuration(cfg.RateLimit)), true
}

// Evaluate counts what cfg needs on tbl since st and decides. It does not
// count at all when the answer cannot depend on the counters (outside the
// window, rate limited, or no trigger configured), so a rate-limited busy table costs nothing.
func Evaluate(ctx context.Context, tbl *table.Table, st State, cfg Config, now time.Time) (Decision, error) {
	if st.Retry != nil && st.Retry.TableUUID != tbl.Metadata().TableUUID().String() {
		// Another table of the name (dropped and re-created) left the list:
		// its paths are not this table's to delete, so they do not make the
		// task due (the task's next run clears them).
		st.Retry = nil
	}
	_, closed := windowClosed(cfg, now)
	if _, limited := rateLimit(cfg, st, now); closed || limited || cfg.Empty() {
		return Decide(cfg, st, Counters{}, now), nil
	}
	c, err := Count(ctx, tbl, st, cfg)
	if err != nil {
		return Decision{Counters: c}, err
	}
	return Decide(cfg, st, c, now), nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// formatDuration prints d the way people say it: 45s, 40m, 2h, 1h30m, 3d,
// 1d12h (rounded to the unit shown).
func formatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Second {
		return d.String()
	}
	if s := d.Round(time.Second); s < time.Minute {
		return fmt.Sprintf("%ds", s/time.Second)
	}
	if m := d.Round(time.Minute); m < time.Hour {
		return fmt.Sprintf("%dm", m/time.Minute)
	} else if m < 24*time.Hour {
		h, rest := m/time.Hour, (m%time.Hour)/time.Minute
		if rest == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, rest)
	}
	const day = 24 * time.Hour
	h := d.Round(time.Hour)
	days, rest := h/day, (h%day)/time.Hour
	if rest == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, rest)
}

// formatBytes prints n in binary units with one decimal: 512 B, 1.2 MiB,
// 128 MiB.
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[i]
}
