package units_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/units"
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
		got := units.FormatDuration(tc.d)
		if got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
		back, err := units.ParseDuration(got)
		if err != nil || back != tc.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}

func TestDurationJSONRoundTrip(t *testing.T) {
	in := struct{ Age units.Duration }{units.Duration(36 * time.Hour)}
	b, err := json.Marshal(in)
	if err != nil || string(b) != `{"Age":"1d12h"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var out struct{ Age units.Duration }
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("Unmarshal(%s) = %+v, %v; want %+v", b, out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"Age":"5 days"}`), &out); err == nil {
		t.Error(`Unmarshal of "5 days" succeeded`)
	}
}
