// Package units is the syntax of sizes ("512MiB", ParseSize) and durations
// ("5d", "1d12h", "90m", "1.5s"; ParseDuration) of the config file, and of
// durations in machine-read output (JSON; FormatDuration), so a value read
// from `--output json` can be pasted back into a config. Unlike the rounded
// forms shown to people, FormatDuration is exact.
package units

import (
	"strconv"
	"strings"
	"time"
)

const day = 24 * time.Hour

// FormatDuration writes d exactly, with whole days as "d" and the rest as
// time.Duration writes it without its zero minutes and seconds: 120h is
// "5d", 36h "1d12h", 90s "1m30s", 1h0m30s stays, 0 is "0s".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 {
		if d == time.Duration(-1<<63) { // -d overflows
			return d.String()
		}
		sign, d = "-", -d
	}
	var b strings.Builder
	b.WriteString(sign)
	if days := d / day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "d")
		d -= days * day
	}
	if d > 0 {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		b.WriteString(s)
	}
	return b.String()
}

// Duration is a time.Duration that marshals with FormatDuration and
// unmarshals with ParseDuration, for fields of output documents.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(FormatDuration(time.Duration(d))), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
