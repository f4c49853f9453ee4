package config

import (
	"fmt"
	"strings"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in s. As in the shell, the
// default is used when VAR is unset or empty; it is taken literally (no
// nested expansion). "$${" stands for a literal "${". A "$" not followed by
// "{" is kept as it is. An unset variable without a default is an error
// naming it.
func expandEnv(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		expr := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("invalid environment variable reference ${%s} (want ${NAME} or ${NAME:-default})", expr)
		}
		val, ok := env(name)
		switch {
		case hasDef && (!ok || val == ""):
			val = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name)
		}
		b.WriteString(val)
		i += 2 + end + 1
	}
	return b.String(), nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
