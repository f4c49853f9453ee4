package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// Every command acts on the global flags it lists and refuses the others
// with exit 2 and a message naming the flag and the command, never ignoring
// one. A flag the command honours is given an invalid value here, so the
// command stops at validating it instead of running.
func TestGlobalFlagsHonouredOrRefused(t *testing.T) {
	all := []string{"config", "output", "table", "task", "log-level"}
	honoured := map[string][]string{
		"run":             all,
		"plan":            all,
		"status":          all,
		"serve":           {"config", "table", "log-level"},
		"config validate": {"config", "output"},
		"version":         {"output"},
		"demo":            {"output", "log-level"},
	}
	valid := map[string]string{"config": "maintainer.yaml", "output": "json", "table": "ns.t", "task": "compact", "log-level": "debug"}
	invalid := map[string]string{"config": "does-not-exist.yaml", "output": "yaml", "table": "ns..t", "task": "vacuum", "log-level": "loud"}
	for cmd, flags := range honoured {
		for _, flag := range all {
			applies := slices.Contains(flags, flag)
			value := valid[flag]
			if applies {
				value = invalid[flag]
			}
			args := append(strings.Fields(cmd), "--"+flag, value)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Chdir(t.TempDir()) // the default config must not find a warehouse here
				var stdout, stderr bytes.Buffer
				err := run(t.Context(), args, &stdout, &stderr, nil)
				var ue usageError
				if !errors.As(err, &ue) || exitCode(err, &stderr) != exitUsage {
					t.Fatalf("err = %v; want a usage error (exit 2)", err)
				}
				refusal := "--" + flag + " does not apply to " + cmd
				if got := err.Error(); applies == strings.Contains(got, refusal) {
					t.Errorf("applies %v, but the error is %q", applies, got)
				}
				if !applies && !strings.Contains(err.Error(), "it applies to: ") {
					t.Errorf("refusal %q does not say which commands take --%s", err, flag)
				}
			})
		}
	}

	// run's own flags are refused by the others, naming the command (plan
	// takes --force and --where too).
	for _, cmd := range []string{"plan", "status", "serve", "config validate", "version", "demo"} {
		for _, flag := range []string{"--force", "--dry-run", "--parallel=2", "--where=a=1"} {
			if cmd == "plan" && (flag == "--force" || flag == "--where=a=1") {
				continue
			}
			args := append(strings.Fields(cmd), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				err := run(t.Context(), args, &stdout, &stderr, nil)
				name, _, _ := strings.Cut(flag, "=")
				if exitCode(err, &stderr) != exitUsage || err == nil ||
					!strings.Contains(err.Error(), cmd+": unknown flag: "+name) {
					t.Errorf("err = %v; want exit 2 naming %s and %s", err, cmd, name)
				}
			})
		}
	}
}
