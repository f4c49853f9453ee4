package config

import (
	"errors"
	"fmt"
	"strings"
)

// MatchGlob reports whether the table identifier ident, written with its
// namespace levels and table name joined by dots ("ns1.ns2.table"), matches
// pattern. The pattern is split into dotted levels like the identifier:
//
//   - a level "**" matches zero or more whole levels ("db.**" matches "db.t"
//     and "db.a.t"; "**.events" matches "events" and "a.b.events";
//     "a.**.t" matches "a.t" and "a.x.y.t"; "**" matches everything);
//   - within a level, "*" matches any run of characters (never a dot) and
//     "?" exactly one character (never a dot);
//   - every other character matches itself; matching is case-sensitive.
//
// An invalid pattern (see ValidGlob) matches nothing.
func MatchGlob(pattern, ident string) bool {
	if ValidGlob(pattern) != nil {
		return false
	}
	return matchLevels(strings.Split(pattern, "."), strings.Split(ident, "."))
}

// ValidGlob reports why pattern is not a valid glob for MatchGlob: it is
// empty, has an empty level ("a..b", ".a", "a."), or uses "**" as part of a
// level instead of as a whole level ("db.ev**").
func ValidGlob(pattern string) error {
	if pattern == "" {
		return errors.New("invalid glob: empty pattern")
	}
	for _, lvl := range strings.Split(pattern, ".") {
		if lvl == "" {
			return fmt.Errorf("invalid glob %q: empty level (two dots in a row, or a leading or trailing dot)", pattern)
		}
		if lvl != "**" && strings.Contains(lvl, "**") {
			return fmt.Errorf("invalid glob %q: ** must be a whole level, as in db.** or **.events (use * within a level)", pattern)
		}
	}
	return nil
}

func matchLevels(pat, id []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Collapse runs of "**" and try every split point.
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(id); i++ {
				if matchLevels(pat, id[i:]) {
					return true
				}
			}
			return false
		}
		if len(id) == 0 || !matchLevel(pat[0], id[0]) {
			return false
		}
		pat, id = pat[1:], id[1:]
	}
	return len(id) == 0
}

// matchLevel matches one level with * (any run) and ? (one rune).
func matchLevel(pat, s string) bool {
	p, t := []rune(pat), []rune(s)
	// Iterative wildcard match with single-star backtracking.
	pi, ti := 0, 0
	starP, starT := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]) && p[pi] != '*':
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			starP, starT = pi, ti
			pi++
		case starP >= 0:
			starT++
			pi, ti = starP+1, starT
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
