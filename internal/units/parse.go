package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"k":   1e3,
	"kb":  1e3,
	"m":   1e6,
	"mb":  1e6,
	"g":   1e9,
	"gb":  1e9,
	"t":   1e12,
	"tb":  1e12,
	"p":   1e15,
	"pb":  1e15,
	"ki":  1 << 10,
	"kib": 1 << 10,
	"mi":  1 << 20,
	"mib": 1 << 20,
	"gi":  1 << 30,
	"gib": 1 << 30,
	"ti":  1 << 40,
	"tib": 1 << 40,
	"pi":  1 << 50,
	"pib": 1 << 50,
}

const sizeUnitList = "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB"

// ParseSize parses a byte size: a plain integer is a number of bytes
// ("0", "1048576"); otherwise a decimal number followed by a unit, with
// optional space between them. Units are case-insensitive: B; KB, MB, GB,
// TB, PB (powers of 1000; K, M, G, T, P also accepted); KiB, MiB, GiB, TiB,
// PiB (powers of 1024; Ki, Mi, Gi, Ti, Pi also accepted). A fraction is
// allowed with a unit ("1.5GiB") and the result is rounded down to whole
// bytes; a bare number must be whole. Negative sizes and sizes above
// math.MaxInt64 are errors.
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	return n, nil
}

func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty")
	}
	if t[0] == '-' {
		return 0, errors.New("must not be negative")
	}
	if t[0] == '+' {
		t = t[1:]
	}
	whole, frac, i := decimal(t)
	if i > len(whole) && frac == "" {
		return 0, errors.New("expected digits after the decimal point")
	}
	if whole == "" && frac == "" {
		return 0, fmt.Errorf("expected a number, optionally followed by a unit (%s)", sizeUnitList)
	}
	unit := strings.TrimLeft(t[i:], " \t")
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (use %s)", unit, sizeUnitList)
	}
	if unit == "" && strings.Trim(frac, "0") != "" {
		return 0, errors.New("a number of bytes must be whole (add a unit such as MiB)")
	}
	num, ok := scale(whole, frac, mult)
	if !ok {
		return 0, errors.New("bad number")
	}
	if !num.IsInt64() {
		return 0, errors.New("too large")
	}
	return num.Int64(), nil
}

var durationUnits = map[string]int64{
	"ns": int64(time.Nanosecond),
	"us": int64(time.Microsecond),
	"µs": int64(time.Microsecond), // U+00B5
	"μs": int64(time.Microsecond), // U+03BC
	"ms": int64(time.Millisecond),
	"s":  int64(time.Second),
	"m":  int64(time.Minute),
	"h":  int64(time.Hour),
	"d":  int64(24 * time.Hour),
	"w":  int64(7 * 24 * time.Hour),
}

// ParseDuration parses a duration the way time.ParseDuration does ("30m",
// "1h30m", "1.5h", "0") and also accepts the units d (24 hours) and w
// (7 days): "5d", "1d12h", "2w". A number without a unit is an error unless
// it is 0. Fractions are rounded down to whole nanoseconds. It reads back
// what FormatDuration writes.
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w", s, err)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty")
	}
	neg := false
	if t[0] == '-' || t[0] == '+' {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "0" {
		return 0, nil
	}
	if t == "" {
		return 0, errors.New("expected a number")
	}
	total := new(big.Int)
	for t != "" {
		whole, frac, i := decimal(t)
		if whole == "" && frac == "" {
			return 0, fmt.Errorf("expected a number at %q", t)
		}
		j := i
		for j < len(t) && t[j] != '.' && (t[j] < '0' || t[j] > '9') {
			j++
		}
		unit := t[i:j]
		if unit == "" {
			return 0, errors.New("missing unit (use ns, us, ms, s, m, h, d or w)")
		}
		mult, ok := durationUnits[unit]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q (use ns, us, ms, s, m, h, d or w)", unit)
		}
		num, ok := scale(whole, frac, mult)
		if !ok {
			return 0, errors.New("bad number")
		}
		total.Add(total, num)
		if total.Cmp(big.NewInt(math.MaxInt64)) > 0 {
			return 0, errors.New("out of range")
		}
		t = t[j:]
	}
	d := time.Duration(total.Int64())
	if neg {
		d = -d
	}
	return d, nil
}

// decimal splits the decimal number t starts with ("1.5" of "1.5GiB") into
// its whole and fraction digits, and returns the index after it (after the
// point when no digit follows it).
func decimal(t string) (whole, frac string, end int) {
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	whole = t[:i]
	if i < len(t) && t[i] == '.' {
		j := i + 1
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		frac, i = t[i+1:j], j
	}
	return whole, frac, i
}

// scale is (whole + frac/10^len(frac)) * mult, computed exactly and
// rounded down.
func scale(whole, frac string, mult int64) (*big.Int, bool) {
	num := new(big.Int)
	if _, ok := num.SetString(whole+frac, 10); !ok {
		return nil, false
	}
	num.Mul(num, big.NewInt(mult))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	return num.Quo(num, den), true
}
