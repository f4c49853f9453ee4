package config

import (
	"strings"
	"testing"
)

func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestExpandEnv(t *testing.T) {
	env := mapEnv(map[string]string{"A": "a", "B": "b", "EMPTY": ""})
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "a"},
		{"x${A}y${B}z", "xaybz"},
		{"${UNSET:-dflt}", "dflt"},
		{"${UNSET:-with spaces:and-colons}", "with spaces:and-colons"},
		{"${EMPTY:-d}", "d"}, // as in the shell, :- also replaces empty
		{"${EMPTY}", ""},
		{"${A:-d}", "a"},
		{"${UNSET:-}", ""},
		{"$HOME", "$HOME"}, // only ${...} is expanded
		{"cost $5", "cost $5"},
		{"$${A}", "${A}"}, // escape
		{"$$", "$$"},
		{"${A}${A}", "aa"},
	} {
		got, err := expandEnv(tc.in, env)
		if err != nil || got != tc.want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"${UNSET}", "environment variable UNSET is not set (use ${UNSET:-default} for a default)"},
		{"x${A}${UNSET}", "environment variable UNSET is not set"},
		{"${A", `unterminated ${ in "${A"`},
		{"${1A}", "invalid environment variable reference ${1A}"},
		{"${}", "invalid environment variable reference ${}"},
		{"${A-b}", "invalid environment variable reference ${A-b}"},
	} {
		_, err := expandEnv(tc.in, env)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("expandEnv(%q) error = %v; want prefix %q", tc.in, err, tc.want)
		}
	}
}
