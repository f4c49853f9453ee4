package config

import (
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/iceberg-maintainer/maintainer/internal/units"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1", 1},
		{"1048576", 1048576},
		{"512MiB", 512 << 20},
		{"128MB", 128_000_000},
		{"1.5GiB", 1536 << 20},
		{"100KiB", 102400},
		{"100KB", 100_000},
		{"1 KiB", 1024},
		{" 2GiB ", 2 << 30},
		{"10kb", 10_000},
		{"4mib", 4 << 20},
		{"2Gi", 2 << 30},
		{"3M", 3_000_000},
		{"1TiB", 1 << 40},
		{"1PB", 1e15},
		{"7B", 7},
		{"0.5KiB", 512},
		{"0.3MiB", 314572}, // rounded down from 314572.8
		{"1.0", 1},
		{"+5", 5},
		{"8191PiB", 8191 << 50},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `invalid size "": empty`},
		{"abc", `invalid size "abc": expected a number, optionally followed by a unit (B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)`},
		{"MiB", `invalid size "MiB": expected a number`},
		{"-1MiB", `invalid size "-1MiB": must not be negative`},
		{"12XB", `invalid size "12XB": unknown unit "XB" (use B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)`},
		{"1.5", `invalid size "1.5": a number of bytes must be whole (add a unit such as MiB)`},
		{"1.MiB", `invalid size "1.MiB": expected digits after the decimal point`},
		{"8192PiB", `invalid size "8192PiB": too large`},
		{"99999999999999999999", `invalid size "99999999999999999999": too large`},
		{"1e6", `invalid size "1e6": unknown unit "e6"`},
		{"5 MiB extra", `invalid size "5 MiB extra": unknown unit "MiB extra"`},
	} {
		_, err := ParseSize(tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseSize(%q) error = %v; want prefix %q", tc.in, err, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"30m", 30 * time.Minute},
		{"72h", 72 * time.Hour},
		{"5d", 5 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"1w2d3h4m5s", (9*24+3)*time.Hour + 4*time.Minute + 5*time.Second},
		{"1.5d", 36 * time.Hour},
		{".5h", 30 * time.Minute},
		{"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"500ms", 500 * time.Millisecond},
		{"10us", 10 * time.Microsecond},
		{"10µs", 10 * time.Microsecond},
		{"7ns", 7},
		{"-1h", -time.Hour},
		{"+1h", time.Hour},
		{" 3s ", 3 * time.Second},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// Everything time.ParseDuration accepts means the same here.
func TestParseDurationMatchesGo(t *testing.T) {
	for _, in := range []string{"1h2m3s", "1.25h", "0.001s", "300ms", "2h45m", "-1.5h", "1h0.5m", "9223372036s"} {
		want, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; time.ParseDuration says %v", in, got, err, want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `invalid duration "": empty`},
		{"60", `invalid duration "60": missing unit (use ns, us, ms, s, m, h, d or w)`},
		{"1d12", `invalid duration "1d12": missing unit`},
		{"5x", `invalid duration "5x": unknown unit "x" (use ns, us, ms, s, m, h, d or w)`},
		{"d", `invalid duration "d": expected a number at "d"`},
		{"-", `invalid duration "-": expected a number`},
		{"1e3s", `invalid duration "1e3s": unknown unit "e"`},
		{"1000000w", `invalid duration "1000000w": out of range`},
		{"5 d", `invalid duration "5 d": unknown unit " d"`},
	} {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseDuration(%q) error = %v; want prefix %q", tc.in, err, tc.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tc := range []struct {
		in   Size
		want string
	}{
		{0, "0"}, {1000, "1000"}, {1024, "1KiB"}, {512 << 20, "512MiB"}, {1536 << 20, "1536MiB"}, {3 << 40, "3TiB"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Size(%d).String() = %q; want %q", int64(tc.in), got, tc.want)
		}
		var back Size
		if err := back.UnmarshalText([]byte(tc.in.String())); err != nil || back != tc.in {
			t.Errorf("Size %d does not round-trip through %q: %d, %v", int64(tc.in), tc.in.String(), int64(back), err)
		}
	}
}

// Size and Duration also work with yaml.Unmarshal, for other packages.
func TestSizeDurationYAMLUnmarshal(t *testing.T) {
	var v struct {
		S Size     `yaml:"s"`
		N Size     `yaml:"n"`
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("s: 512MiB\nn: 1024\nd: 1d12h\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.S != 512<<20 || v.N != 1024 || time.Duration(v.D) != 36*time.Hour {
		t.Errorf("got %+v", v)
	}
	if err := yaml.Unmarshal([]byte("s: 12XB\n"), &v); err == nil || !strings.Contains(err.Error(), `unknown unit "XB"`) {
		t.Errorf("bad size: err = %v", err)
	}
	if err := yaml.Unmarshal([]byte("d: 60\n"), &v); err == nil || !strings.Contains(err.Error(), "missing unit") {
		t.Errorf("bad duration: err = %v", err)
	}
}

// A config Duration writes the form the output uses, and reads it back.
func TestDurationWritesTheOutputForm(t *testing.T) {
	for _, d := range []time.Duration{5 * 24 * time.Hour, 90 * time.Second, 36 * time.Hour} {
		b, err := Duration(d).MarshalText()
		if err != nil || string(b) != units.FormatDuration(d) {
			t.Errorf("Duration(%v) writes %q, %v; want %q", d, b, err, units.FormatDuration(d))
		}
		var back Duration
		if err := back.UnmarshalText(b); err != nil || time.Duration(back) != d {
			t.Errorf("%q reads back as %v, %v", b, time.Duration(back), err)
		}
	}
}
