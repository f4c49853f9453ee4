package config

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/duration"
)

// Size is a byte count written in a config file either as an integer number
// of bytes or as a number with a unit (see ParseSize).
type Size int64

// Duration is a time.Duration written in a config file as a Go duration that
// may also use the units d (24h) and w (7d) (see ParseDuration).
type Duration time.Duration

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
		if frac == "" {
			return 0, errors.New("expected digits after the decimal point")
		}
		i = j
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
	// value = (whole + frac/10^len(frac)) * mult, computed exactly.
	num := new(big.Int)
	if _, ok := num.SetString(whole+frac, 10); !ok {
		return 0, errors.New("bad number")
	}
	num.Mul(num, big.NewInt(mult))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	num.Quo(num, den)
	if !num.IsInt64() {
		return 0, errors.New("too large")
	}
	return num.Int64(), nil
}

// ParseDuration parses a duration the way time.ParseDuration does ("30m",
// "1h30m", "1.5h", "0") and also accepts the units d (24 hours) and w
// (7 days): "5d", "1d12h", "2w". A number without a unit is an error unless
// it is 0. Fractions are rounded down to whole nanoseconds. The output's
// durations (duration.Format) read back with it.
func ParseDuration(s string) (time.Duration, error) { return duration.Parse(s) }

// String formats the size with the largest binary unit that divides it
// exactly ("512MiB"), else as a number of bytes.
func (s Size) String() string {
	n := int64(s)
	if n != 0 {
		for _, u := range []struct {
			name string
			mult int64
		}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if n%u.mult == 0 {
				return fmt.Sprintf("%d%s", n/u.mult, u.name)
			}
		}
	}
	return fmt.Sprintf("%d", n)
}

// MarshalText writes the size as String does, so it parses back.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the size with ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// UnmarshalYAML lets yaml.Unmarshal (goccy/go-yaml) decode a Size from an
// integer or a string with a unit.
func (s *Size) UnmarshalYAML(unmarshal func(any) error) error {
	text, err := yamlScalarText(unmarshal)
	if err != nil {
		return err
	}
	return s.UnmarshalText([]byte(text))
}

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as String does, so it parses back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses the duration with ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML lets yaml.Unmarshal (goccy/go-yaml) decode a Duration.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	text, err := yamlScalarText(unmarshal)
	if err != nil {
		return err
	}
	return d.UnmarshalText([]byte(text))
}

func yamlScalarText(unmarshal func(any) error) (string, error) {
	var v any
	if err := unmarshal(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int, int64, uint64, int32, uint32, uint, float64, float32:
		return fmt.Sprint(x), nil
	case nil:
		return "", errors.New("missing value")
	default:
		return "", fmt.Errorf("expected a scalar, got %T", v)
	}
}
