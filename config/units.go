package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/units"
)

// Size is a byte count written in a config file either as an integer number
// of bytes or as a number with a unit (see ParseSize).
type Size int64

// Duration is a time.Duration written in a config file as a Go duration that
// may also use the units d (24h) and w (7d) (see ParseDuration).
type Duration time.Duration

// ParseSize parses a byte size: a plain integer is a number of bytes
// ("0", "1048576"); otherwise a decimal number followed by a unit, with
// optional space between them. Units are case-insensitive: B; KB, MB, GB,
// TB, PB (powers of 1000; K, M, G, T, P also accepted); KiB, MiB, GiB, TiB,
// PiB (powers of 1024; Ki, Mi, Gi, Ti, Pi also accepted). A fraction is
// allowed with a unit ("1.5GiB") and the result is rounded down to whole
// bytes; a bare number must be whole. Negative sizes and sizes above
// math.MaxInt64 are errors.
func ParseSize(s string) (int64, error) { return units.ParseSize(s) }

// ParseDuration parses a duration the way time.ParseDuration does ("30m",
// "1h30m", "1.5h", "0") and also accepts the units d (24 hours) and w
// (7 days): "5d", "1d12h", "2w". A number without a unit is an error unless
// it is 0. Fractions are rounded down to whole nanoseconds. The output's
// durations (units.FormatDuration) read back with it.
func ParseDuration(s string) (time.Duration, error) { return units.ParseDuration(s) }

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

// String formats the duration as the output does (units.FormatDuration:
// "5d", "1m30s"), which ParseDuration reads back: one written form for
// config and output alike.
func (d Duration) String() string { return units.FormatDuration(time.Duration(d)) }

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
