package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	File string `json:"file"`           // the config file's name, as given to Load or Parse
	Line int    `json:"line"`           // 1-based; 0 when the problem has no position
	Col  int    `json:"column"`         // 1-based; 0 when the problem has no position
	Path string `json:"path,omitempty"` // the field, e.g. "tables[1].compact.min_input_files"
	Msg  string `json:"message"`        // what is wrong, with the offending value
}

// String formats the problem as "file:line:col: path: msg", leaving out the
// parts it does not have.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ValidationError holds every problem found in a config file, in the order
// of their positions. Load, Parse and ForTable return it; a CLI prints
// Error() (one problem per line) and exits 2.
type ValidationError struct {
	Problems []Problem
}

// Error prints one problem per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects problems found in one file.
type problems struct {
	file string
	list []Problem
}

func (ps *problems) add(at position, path, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: ps.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns a *ValidationError with the problems sorted by position, or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	// A value reached twice (through a YAML alias or merge key) is reported
	// once, under the first path that reached it.
	list = slices.CompactFunc(list, func(a, b Problem) bool {
		return a.Line > 0 && a.Line == b.Line && a.Col == b.Col && a.Msg == b.Msg
	})
	return &ValidationError{Problems: list}
}

// position is a 1-based line and column in a config file; the zero value
// means unknown.
type position struct{ line, col int }
