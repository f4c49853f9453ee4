package duration

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

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

// Parse parses a duration the way time.ParseDuration does ("30m",
// "1h30m", "1.5h", "0") and also accepts the units d (24 hours) and w
// (7 days): "5d", "1d12h", "2w". A number without a unit is an error unless
// it is 0. Fractions are rounded down to whole nanoseconds. It reads back
// what Format writes, and is the config file's duration syntax.
func Parse(s string) (time.Duration, error) {
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
		i := 0
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		whole := t[:i]
		frac := ""
		if i < len(t) && t[i] == '.' {
			j := i + 1
			for j < len(t) && t[j] >= '0' && t[j] <= '9' {
				j++
			}
			frac = t[i+1 : j]
			i = j
		}
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
		num := new(big.Int)
		num.SetString(whole+frac, 10)
		num.Mul(num, big.NewInt(mult))
		den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
		num.Quo(num, den)
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
