package config

import (
	"strings"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, ident string
		want           bool
	}{
		{"db.events", "db.events", true},
		{"db.events", "db.event", false},
		{"db.events", "db.events2", false},
		{"db.events", "x.db.events", false},
		{"db.events_*", "db.events_2024", true},
		{"db.events_*", "db.events_", true},
		{"db.events_*", "db.events", false},
		{"db.events_*", "db.events_x.y", false}, // * stays within its level
		{"db.*", "db.t", true},
		{"db.*", "db.a.t", false},
		{"*.*", "db.t", true},
		{"*", "db.t", false},
		{"*.t", "a.b.t", false},
		{"db.**", "db.t", true},
		{"db.**", "db.a.b.t", true},
		{"db.**", "db", true}, // zero levels
		{"db.**", "dbx.t", false},
		{"**.events", "a.b.events", true},
		{"**.events", "events", true},
		{"**.events", "a.events2", false},
		{"a.**.t", "a.t", true},
		{"a.**.t", "a.x.y.t", true},
		{"a.**.t", "a.x.y.u", false},
		{"a.**.t", "b.x.t", false},
		{"a.**.**.t", "a.t", true},
		{"**", "anything.at.all", true},
		{"**.*_raw", "lake.bronze.x_raw", true},
		{"**.*_raw", "lake.bronze.x_raw.y", false},
		{"db.t?", "db.t1", true},
		{"db.t?", "db.t12", false},
		{"db.t?", "db.t", false},
		{"db?t", "db.t", false}, // ? never matches the dot
		{"db.*a*b*", "db.xaybz", true},
		{"db.*a*b", "db.xaybz", false},
		{"db.[a]", "db.[a]", true}, // brackets are literal
		{"db.[a]", "db.a", false},
		{"db.a\\*", "db.a\\x", true}, // backslash is literal too
		{"DB.t", "db.t", false},      // case-sensitive
		{"db.é?", "db.éa", true},
		{"", "db.t", false}, // invalid patterns match nothing
		{"db..t", "db..t", false},
		{"db.ev**", "db.events", false},
	} {
		if got := MatchGlob(tc.pattern, tc.ident); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v; want %v", tc.pattern, tc.ident, got, tc.want)
		}
	}
}

func TestValidGlob(t *testing.T) {
	for _, p := range []string{"db.t", "*", "**", "db.**", "**.t", "a.**.b", "a?.*x*", "[x]"} {
		if err := ValidGlob(p); err != nil {
			t.Errorf("ValidGlob(%q) = %v; want nil", p, err)
		}
	}
	for _, tc := range []struct{ pattern, want string }{
		{"", "invalid glob: empty pattern"},
		{"db..t", `invalid glob "db..t": empty level`},
		{".t", `invalid glob ".t": empty level`},
		{"db.", `invalid glob "db.": empty level`},
		{"db.ev**", `invalid glob "db.ev**": ** must be a whole level`},
		{"***", `invalid glob "***": ** must be a whole level`},
	} {
		err := ValidGlob(tc.pattern)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ValidGlob(%q) = %v; want prefix %q", tc.pattern, err, tc.want)
		}
	}
}
