// Package outputcheck checks a JSON document the binary emits against the
// output conventions, so that tests of every document (run, plan, status,
// the HTTP answers, version) fail on a new field that breaks them:
//
//   - no null: an empty list is [], an absent detail is left out;
//   - a duration is a string in the config's form ("5d", "1m30s"), or a
//     number whose key names its unit (duration_seconds);
//   - a timestamp is an RFC 3339 string, or a number whose key names its
//     unit (timestamp_ms);
//   - a size is an integer of bytes under a key ending in _bytes, never a
//     string like "1.2 MiB".
package outputcheck

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/units"
)

var (
	dateLike  = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}`)
	humanSize = regexp.MustCompile(`^[0-9]+(\.[0-9]+)? ?[KMGTPE]?i?B$`)
	// unitSuffix names the unit of a number.
	unitSuffixes = []string{"_seconds", "_ms", "_bytes"}
)

// durationKeys name durations: "age", "max_snapshot_age", "rate_limit"...
func durationKey(k string) bool {
	for _, w := range []string{"age", "duration", "interval", "timeout", "grace", "rate_limit", "ttl", "wait"} {
		if k == w || strings.HasSuffix(k, "_"+w) || strings.HasPrefix(k, w+"_") {
			return true
		}
	}
	return false
}

// timeKey names a point in time.
func timeKey(k string) bool {
	switch k {
	case "timestamp", "modified", "cutoff", "now", "until", "last_run", "last_attempt", "last_poll",
		"oldest_snapshot", "last_compaction":
		return true
	}
	return strings.HasSuffix(k, "_at") || strings.HasSuffix(k, "_time") || strings.HasSuffix(k, "_timestamp")
}

func hasUnit(k string) bool {
	return slices.ContainsFunc(unitSuffixes, func(s string) bool { return strings.HasSuffix(k, s) })
}

// Check decodes doc and returns every breach of the conventions, each with
// its path (e.g. "orphans.candidates[0].age"). lists are the keys (or
// index-free paths, "compact.groups") of lists: where present they must be
// arrays; Missing checks that they are there.
func Check(doc []byte, lists ...string) ([]string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("decode JSON document: %w", err)
	}
	var problems []string
	walk("", "", v, lists, &problems)
	return problems, nil
}

// isList reports whether the object member at path (indices dropped, as
// "compact.groups") with the given key is one of lists: an entry with a dot
// names a path, one without a key anywhere.
func isList(lists []string, path, key string) bool {
	bare := listIndex.ReplaceAllString(path, "")
	return slices.ContainsFunc(lists, func(l string) bool {
		if strings.Contains(l, ".") {
			return l == bare
		}
		return l == key
	})
}

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

func walk(path, key string, v any, lists []string, problems *[]string) {
	bad := func(format string, args ...any) {
		*problems = append(*problems, fmt.Sprintf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	switch x := v.(type) {
	case nil:
		bad("null (an empty list is [], an absent detail is left out)")
	case map[string]any:
		for k, c := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if _, ok := c.([]any); !ok && isList(lists, p, k) {
				*problems = append(*problems, fmt.Sprintf("%s: a list must be an array ([] when empty), got %s", p, kind(c)))
			}
			walk(p, k, c, lists, problems)
		}
	case []any:
		for i, c := range x {
			walk(fmt.Sprintf("%s[%d]", path, i), key, c, lists, problems)
		}
	case string:
		switch {
		case durationKey(key) && !hasUnit(key) && !readsAsDuration(x):
			bad("duration %q is not in the config's form (\"5d\", \"1m30s\")", x)
		case timeKey(key) || dateLike.MatchString(x):
			if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
				bad("timestamp %q is not RFC 3339", x)
			}
		case humanSize.MatchString(x):
			bad("size %q: sizes are integers of bytes under a key ending in _bytes", x)
		}
	case float64:
		switch {
		case (durationKey(key) || timeKey(key)) && !hasUnit(key):
			bad("a number needs its unit in the key (%s_seconds, %s_ms) or a string value", key, key)
		case strings.Contains(key, "size") && !strings.HasSuffix(key, "_bytes"):
			bad("a size needs a key ending in _bytes")
		case strings.HasSuffix(key, "_bytes") && x != float64(int64(x)):
			bad("bytes must be an integer, got %v", x)
		}
	}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// Missing returns the dotted paths ("compact.groups") absent from doc: the
// lists of a document's contract are there even when empty.
func Missing(doc []byte, paths ...string) ([]string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("decode JSON document: %w", err)
	}
	var missing []string
	for _, p := range paths {
		cur := v
		for _, k := range strings.Split(p, ".") {
			m, _ := cur.(map[string]any)
			var ok bool
			if cur, ok = m[k]; !ok {
				missing = append(missing, p)
				break
			}
		}
	}
	return missing, nil
}

// Lists are the lists of the output documents that consumers iterate:
// groups, candidates, the queue... They are [] when empty.
func Lists() []string {
	return []string{"compact.groups", "compact.partitions", "dead_delete_files", "commits", "expired", "removed_refs",
		"candidates", "tasks", "queue", "running", "running_tasks", "recent", "reasons", "sources", "queued", "held"}
}

// Expect fails t for each breach of the conventions in doc (with Lists)
// and each of the contract's paths it lacks.
func Expect(t testing.TB, what string, doc []byte, paths ...string) {
	t.Helper()
	problems, err := Check(doc, Lists()...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, doc)
	}
	missing, err := Missing(doc, paths...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, doc)
	}
	for _, m := range missing {
		problems = append(problems, m+": missing")
	}
	if len(problems) > 0 {
		t.Errorf("%s breaks the output conventions:\n  %s\n%s", what, strings.Join(problems, "\n  "), doc)
	}
}

// readsAsDuration reports whether s pastes back into a config as a
// duration: the config's own parser, not a copy of its syntax.
func readsAsDuration(s string) bool {
	_, err := units.ParseDuration(s)
	return err == nil
}
