package duration_test

import (
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/duration"
)

func TestFormatReadsBack(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{90 * time.Second, "1m30s"},
		{time.Hour, "1h"},
		{time.Hour + 30*time.Second, "1h0m30s"},
		{5 * 24 * time.Hour, "5d"},
		{36 * time.Hour, "1d12h"},
		{7*24*time.Hour + time.Minute, "7d1m"},
		{1500 * time.Millisecond, "1.5s"},
		{-36 * time.Hour, "-1d12h"},
		{250 * time.Microsecond, "250µs"},
	} {
		got := duration.Format(tc.d)
		if got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.d, got, tc.want)
		}
		back, err := config.ParseDuration(got)
		if err != nil || back != tc.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}
