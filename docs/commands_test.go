package docs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/iceberg-maintainer/maintainer/config"
	"github.com/iceberg-maintainer/maintainer/internal/outputcheck"
	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/server"
)

// Commands in ```sh (or ```bash) blocks: every `maintainer ...` command line
// (also after `kubectl exec ... --`, as `go run ./cmd/maintainer ...` and as
// the image of `docker run`) uses only commands and flags the binary's
// --help lists, with valid --output, --task and --table values. Every curl
// body sent to /v1/trigger is a valid trigger request.

// cmdHelp is what `maintainer <path> --help` says.
type cmdHelp struct {
	subs  map[string]bool
	long  map[string]bool // long flag -> takes a value
	short map[string]bool
}

var (
	helpMu    sync.Mutex
	helpCache = map[string]cmdHelp{}
	flagLine  = regexp.MustCompile(`^\s+(?:-(\w), )?--([\w-]+)( \S+)?\s{2,}`)
	subLine   = regexp.MustCompile(`^  ([a-z][\w-]*)\s{2,}`)
)

func helpFor(t *testing.T, path []string) cmdHelp {
	t.Helper()
	key := strings.Join(path, " ")
	helpMu.Lock()
	defer helpMu.Unlock()
	if h, ok := helpCache[key]; ok {
		return h
	}
	out, err := exec.Command(maintainerBinary(t), append(slices.Clone(path), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("maintainer %s --help: %v\n%s", key, err, out)
	}
	h := cmdHelp{subs: map[string]bool{}, long: map[string]bool{}, short: map[string]bool{}}
	section := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			section = l
			continue
		case section == "Available Commands:":
			if m := subLine.FindStringSubmatch(l); m != nil {
				h.subs[m[1]] = true
			}
		case section == "Flags:" || section == "Global Flags:":
			if m := flagLine.FindStringSubmatch(l); m != nil {
				h.long[m[2]] = m[3] != ""
				if m[1] != "" {
					h.short[m[1]] = m[3] != ""
				}
			}
		}
	}
	if len(h.long) == 0 {
		t.Fatalf("maintainer %s --help lists no flags:\n%s", key, out)
	}
	helpCache[key] = h
	return h
}

// shellWords splits a shell line into words and operators (|, ;, &, &&,
// ||, (, ), --), dropping comments and redirections. Quotes are removed.
func shellWords(line string) []string {
	var out []string
	var cur strings.Builder
	inWord, skipNext := false, false
	flush := func() {
		if inWord {
			w := cur.String()
			if skipNext {
				skipNext = false
			} else {
				out = append(out, w)
			}
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return out
		case strings.IndexByte("|;&()", c) >= 0:
			if c == '&' && cur.String() == "2>" {
				cur.WriteByte(c) // 2>&1
				continue
			}
			flush()
			op := string(c)
			for i+1 < len(line) && strings.IndexByte("|&", line[i+1]) >= 0 && strings.IndexByte("|&", c) >= 0 {
				i++
				op += string(line[i])
			}
			out = append(out, op)
		case c == '>' || c == '<':
			if !inWord || cur.String() == "2" || cur.String() == "1" {
				cur.Reset()
				inWord = false
				for i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '&') {
					i++
				}
				if i+1 < len(line) && line[i+1] != ' ' {
					// >file or >&1: the target is glued to the operator
					for i+1 < len(line) && line[i+1] != ' ' {
						i++
					}
				} else {
					skipNext = true
				}
				continue
			}
			cur.WriteByte(c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return out
}

// commandLines joins continued lines of a shell block.
func commandLines(b fence) (lines []string, at []int) {
	var cur strings.Builder
	start := 0
	for i, l := range b.body {
		if cur.Len() == 0 {
			start = b.line + 1 + i
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		at = append(at, start)
		cur.Reset()
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
		at = append(at, start)
	}
	return lines, at
}

var (
	envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	imageRef  = regexp.MustCompile(`(^|/)maintainer:[\w.-]+$`)
	operators = map[string]bool{"|": true, "||": true, "&&": true, ";": true, "&": true, "(": true, ")": true, "--": true, "$(": true}
)

// segments splits words into simple commands, without leading variable
// assignments and wrappers.
func segments(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range append(words, ";") {
		if operators[w] || strings.HasPrefix(w, "$(") {
			for len(cur) > 0 && (envAssign.MatchString(cur[0]) || slices.Contains([]string{"sudo", "time", "exec", "env", "watch"}, cur[0])) {
				cur = cur[1:]
			}
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			if strings.HasPrefix(w, "$(") && len(w) > 2 {
				cur = append(cur, w[2:])
			}
			continue
		}
		cur = append(cur, w)
	}
	return out
}

// maintainerArgs returns the arguments of a maintainer invocation, if seg
// is one.
func maintainerArgs(seg []string) ([]string, bool) {
	w := seg[0]
	switch {
	case w == "maintainer" || strings.HasSuffix(w, "/maintainer"):
		return seg[1:], true
	case w == "go" && len(seg) >= 3 && seg[1] == "run" && strings.HasSuffix(seg[2], "cmd/maintainer"):
		return seg[3:], true
	case w == "docker":
		for i, a := range seg {
			if i > 1 && imageRef.MatchString(a) {
				return seg[i+1:], true
			}
		}
	}
	return nil, false
}

// checkInvocation checks args against the binary's command tree. A
// mention in prose (`maintainer plan --table`) may leave out the value of
// its last flag.
func checkInvocation(t *testing.T, at string, args []string, mention bool) {
	t.Helper()
	var path []string
	h := helpFor(t, nil)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			takes, ok := h.long[name]
			if !ok {
				t.Errorf("%s: maintainer %s has no flag --%s", at, strings.Join(path, " "), name)
				continue
			}
			if takes && !hasVal {
				if i+1 >= len(args) {
					if !mention {
						t.Errorf("%s: --%s needs a value", at, name)
					}
					continue
				}
				i++
				val = args[i]
			}
			checkFlagValue(t, at, name, val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			takes, ok := h.short[a[1:]]
			if !ok {
				t.Errorf("%s: maintainer %s has no flag %s", at, strings.Join(path, " "), a)
			} else if takes {
				i++
			}
		case h.subs[a]:
			path = append(path, a)
			h = helpFor(t, path)
		default:
			t.Errorf("%s: maintainer %s: unexpected argument %q (commands: %v)", at, strings.Join(path, " "), a, keys(h.subs))
		}
	}
	if len(path) == 0 && !(mention && len(args) == 0) && !slices.Contains(args, "--help") && !slices.Contains(args, "-h") {
		t.Errorf("%s: maintainer without a command: %v", at, args)
	}
}

func checkFlagValue(t *testing.T, at, name, val string) {
	t.Helper()
	switch name {
	case "output":
		if val != "text" && val != "json" {
			t.Errorf("%s: --output %q: want text or json", at, val)
		}
	case "task":
		if !slices.Contains(maintenance.TaskNames(), val) {
			t.Errorf("%s: --task %q: want one of %v", at, val, maintenance.TaskNames())
		}
	case "table":
		if err := config.ValidGlob(val); err != nil {
			t.Errorf("%s: --table: %v", at, err)
		}
	case "log-level":
		if !slices.Contains([]string{"debug", "info", "warn", "error"}, val) {
			t.Errorf("%s: --log-level %q", at, val)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// shellBlocks returns the sh and bash blocks of every doc.
func shellBlocks(t *testing.T) []fence {
	var out []fence
	for _, f := range docFiles(t) {
		bs, _ := f.fences()
		for _, b := range bs {
			if b.lang == "sh" || b.lang == "bash" || b.lang == "shell" {
				out = append(out, b)
			}
		}
	}
	return out
}

func TestDocumentedCommandsExist(t *testing.T) {
	n := 0
	for _, b := range shellBlocks(t) {
		lines, at := commandLines(b)
		for i, l := range lines {
			for _, seg := range segments(shellWords(l)) {
				args, ok := maintainerArgs(seg)
				if !ok {
					continue
				}
				n++
				checkInvocation(t, fmt.Sprintf("%s:%d", b.file, at[i]), args, false)
			}
		}
	}
	// Commands mentioned in prose code spans: `maintainer status --table`.
	for _, f := range docFiles(t) {
		spans, lines := f.proseSpans()
		for i, sp := range spans {
			for _, seg := range segments(shellWords(sp)) {
				if args, ok := maintainerArgs(seg); ok {
					n++
					checkInvocation(t, fmt.Sprintf("%s:%d", f.path, lines[i]), args, true)
				}
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d maintainer command lines found in docs/", n)
	}
}

// docServer is the HTTP API of serve over a queue that knows every dotted
// table, for replaying documented requests.
func docServer(t *testing.T) http.Handler {
	t.Helper()
	s, err := server.New(server.DefaultConfig(), server.Deps{Queue: fakeQueue{}, Tasks: maintenance.TaskNames()})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// Every curl request body sent to /v1/trigger or /v1/alertmanager in the
// docs is accepted by the server (202).
func TestDocumentedCurlRequests(t *testing.T) {
	h := docServer(t)
	n := 0
	for _, b := range shellBlocks(t) {
		lines, at := commandLines(b)
		for i, l := range lines {
			for _, seg := range segments(shellWords(l)) {
				if seg[0] != "curl" {
					continue
				}
				var url, body string
				for j := 1; j < len(seg); j++ {
					a := seg[j]
					switch {
					case a == "-d" || a == "--data" || a == "--data-raw" || a == "--json":
						if j+1 < len(seg) {
							body = seg[j+1]
							j++
						}
					case strings.HasPrefix(a, "-d") && len(a) > 2 && a[2] == '{':
						body = a[2:]
					case strings.Contains(a, "/v1/"):
						url = a
					}
				}
				where := fmt.Sprintf("%s:%d", b.file, at[i])
				if url == "" || body == "" || !strings.HasPrefix(body, "{") {
					continue
				}
				path := url[strings.Index(url, "/v1/"):]
				if path != "/v1/trigger" && path != "/v1/alertmanager" {
					t.Errorf("%s: a body sent to %s", where, path)
					continue
				}
				n++
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
				if w.Code != http.StatusAccepted {
					t.Errorf("%s: POST %s %s: %d %s", where, path, body, w.Code, w.Body)
				}
			}
		}
	}
	if n < 4 {
		t.Errorf("only %d curl requests with a body found in docs/", n)
	}
}

// strictDecode decodes every JSON value of text into a fresh T, refusing
// unknown fields.
func strictDecode[T any](text string) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
	}
	return nil
}

// roundTrip checks output examples: each JSON value of text decodes into a
// T, and every key it has is one the code writes when it encodes that T
// (output types may add computed fields when encoding, like an orphan
// candidate's age, so a strict decode would be wrong).
func roundTrip[T any](text string) error {
	dec := json.NewDecoder(strings.NewReader(text))
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		again, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var doc, code any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		if err := json.Unmarshal(again, &code); err != nil {
			return err
		}
		if missing := extraKeys("", doc, code); len(missing) > 0 {
			return fmt.Errorf("fields the code does not write: %s", strings.Join(missing, ", "))
		}
	}
	return nil
}

// conventions checks each JSON value of text against the output conventions
// (durations, timestamps, sizes, no null).
func conventions(text string) error {
	dec := json.NewDecoder(strings.NewReader(text))
	var problems []string
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		p, err := outputcheck.Check(raw, outputcheck.Lists()...)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("breaks the output conventions: %s", strings.Join(problems, "; "))
	}
	return nil
}

// extraKeys lists the object keys of doc that code lacks, recursively.
func extraKeys(path string, doc, code any) []string {
	var out []string
	switch d := doc.(type) {
	case map[string]any:
		c, _ := code.(map[string]any)
		for k, v := range d {
			cv, ok := c[k]
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, extraKeys(path+"."+k, v, cv)...)
		}
	case []any:
		c, _ := code.([]any)
		for i, v := range d {
			if i < len(c) {
				out = append(out, extraKeys(fmt.Sprintf("%s[%d]", path, i), v, c[i])...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// triggerAnswer is the 202 body of /v1/trigger and /v1/alertmanager.
type triggerAnswer struct {
	Queued []server.Enqueued `json:"queued"`
	Note   string            `json:"note"`
}

// Every ```json block is one of the documented shapes, and decodes into
// the code's type without unknown fields: an Alertmanager notification (and
// the server accepts it), a trigger request (accepted), a trigger answer,
// GET /v1/status, a `run`/`plan --output json` line, a `status --output
// json` line, /readyz, or an error body.
func TestDocumentedJSON(t *testing.T) {
	h := docServer(t)
	n := 0
	for _, f := range docFiles(t) {
		bs, _ := f.fences()
		for _, b := range bs {
			if b.lang != "json" && b.lang != "jsonl" {
				continue
			}
			n++
			text := strings.Join(b.body, "\n")
			var first map[string]json.RawMessage
			if err := json.NewDecoder(strings.NewReader(text)).Decode(&first); err != nil {
				t.Errorf("%s: not a JSON object: %v", b.where(), err)
				continue
			}
			has := func(k ...string) bool {
				for _, x := range k {
					if _, ok := first[x]; !ok {
						return false
					}
				}
				return true
			}
			post := func(path string) {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(text)))
				if w.Code != http.StatusAccepted {
					t.Errorf("%s: POST %s: %d %s", b.where(), path, w.Code, w.Body)
				}
			}
			var err error
			switch {
			case has("version", "alerts"):
				post("/v1/alertmanager")
			case has("error"):
				err = strictDecode[struct {
					Error  string `json:"error"`
					Alerts []struct {
						Alertname   string `json:"alertname"`
						Fingerprint string `json:"fingerprint"`
						Error       string `json:"error"`
					} `json:"alerts"`
					Queued []server.Enqueued `json:"queued"`
				}](text)
			case has("queued"):
				err = errors.Join(roundTrip[triggerAnswer](text), conventions(text))
			case has("recent"):
				err = errors.Join(roundTrip[maintenance.Status](text), conventions(text))
			case has("status", "checks"):
				err = strictDecode[struct {
					Status string            `json:"status"`
					Checks map[string]string `json:"checks"`
					Error  string            `json:"error"`
				}](text)
			case has("table", "task", "status"):
				err = errors.Join(roundTrip[maintenance.Outcome](text), conventions(text))
			case has("table", "data_files"):
				err = errors.Join(roundTrip[maintenance.Health](text), conventions(text))
			case has("table"):
				if err = strictDecode[server.Request](text); err == nil {
					post("/v1/trigger")
				}
			default:
				t.Errorf("%s: a JSON example of no known shape (keys %v)", b.where(), keys(first))
			}
			if err != nil {
				t.Errorf("%s: %v", b.where(), err)
			}
		}
	}
	if n < 5 {
		t.Errorf("only %d JSON examples found", n)
	}
}
