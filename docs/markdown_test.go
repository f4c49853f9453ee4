package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mdFile is one Markdown file of docs/, split into lines.
type mdFile struct {
	path  string // relative to docs/, e.g. "guides/cronjob.md"
	lines []string
}

// fence is one fenced code block.
type fence struct {
	file string
	line int    // 1-based line of the opening ```
	lang string // the info string's first word: yaml, sh, json...
	body []string
}

func (f fence) where() string { return f.file + ":" + strconv.Itoa(f.line) }

// mdTable is one Markdown table outside code blocks.
type mdTable struct {
	file    string
	line    int
	header  []string // lower-cased cells
	rows    [][]string
	rowLine []int
}

// docFiles reads every .md file under docs/ (the test's working directory).
func docFiles(t *testing.T) []mdFile {
	t.Helper()
	var out []mdFile
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, mdFile{path: filepath.ToSlash(p), lines: strings.Split(string(b), "\n")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Markdown files under docs/")
	}
	return out
}

func docFile(t *testing.T, path string) mdFile {
	t.Helper()
	for _, f := range docFiles(t) {
		if f.path == path {
			return f
		}
	}
	t.Fatalf("docs/%s does not exist", path)
	return mdFile{}
}

var fenceOpen = regexp.MustCompile("^(\\s*)(```+)\\s*([A-Za-z0-9_+-]*)")

// fences returns the fenced code blocks of f, and marks which lines are
// inside one.
func (f mdFile) fences() ([]fence, []bool) {
	var out []fence
	inside := make([]bool, len(f.lines))
	for i := 0; i < len(f.lines); i++ {
		m := fenceOpen.FindStringSubmatch(f.lines[i])
		if m == nil {
			continue
		}
		fc := fence{file: f.path, line: i + 1, lang: strings.ToLower(m[3])}
		inside[i] = true
		indent, ticks := m[1], m[2]
		j := i + 1
		for ; j < len(f.lines); j++ {
			inside[j] = true
			if strings.HasPrefix(strings.TrimSpace(f.lines[j]), ticks) && strings.TrimSpace(strings.Trim(strings.TrimSpace(f.lines[j]), "`")) == "" {
				break
			}
			fc.body = append(fc.body, strings.TrimPrefix(f.lines[j], indent))
		}
		out = append(out, fc)
		i = j
	}
	return out, inside
}

var tableSep = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)

// tables returns the Markdown tables of f outside code blocks.
func (f mdFile) tables() []mdTable {
	_, inside := f.fences()
	var out []mdTable
	for i := 0; i+1 < len(f.lines); i++ {
		if inside[i] || !strings.HasPrefix(strings.TrimSpace(f.lines[i]), "|") || !tableSep.MatchString(f.lines[i+1]) {
			continue
		}
		tb := mdTable{file: f.path, line: i + 1}
		for _, c := range splitRow(f.lines[i]) {
			tb.header = append(tb.header, strings.ToLower(c))
		}
		j := i + 2
		for ; j < len(f.lines) && !inside[j] && strings.HasPrefix(strings.TrimSpace(f.lines[j]), "|"); j++ {
			tb.rows = append(tb.rows, splitRow(f.lines[j]))
			tb.rowLine = append(tb.rowLine, j+1)
		}
		out = append(out, tb)
		i = j - 1
	}
	return out
}

// splitRow splits a table row into trimmed cells on the pipes that are
// neither escaped nor inside a code span.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	var cur strings.Builder
	inCode := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			inCode = !inCode
			cur.WriteByte(c)
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// hasHeader reports whether the table's first columns are exactly cols.
func (tb mdTable) hasHeader(cols ...string) bool {
	return len(tb.header) >= len(cols) && slices.Equal(tb.header[:len(cols)], cols)
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the contents of the code spans of s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// onlyCodeSpan returns the content of s when s is exactly one code span.
func onlyCodeSpan(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if m := codeSpanRE.FindStringSubmatch(s); m != nil && m[0] == s {
		return m[1], true
	}
	return "", false
}

// proseSpans returns the code spans of every line of f outside code blocks,
// with their line numbers.
func (f mdFile) proseSpans() (spans []string, lines []int) {
	_, inside := f.fences()
	for i, l := range f.lines {
		if inside[i] {
			continue
		}
		for _, s := range codeSpans(l) {
			spans = append(spans, s)
			lines = append(lines, i+1)
		}
	}
	return spans, lines
}
