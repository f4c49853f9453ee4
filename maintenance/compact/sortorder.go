package compact

import (
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/validate"
)

// The compaction strategies of compact.strategy (Spark's rewrite_data_files
// strategies; zorder is not offered).
const (
	StrategyBinpack = "binpack"
	StrategySort    = "sort"
)

// DefaultSortMemory is the decoded Arrow data one sort group holds at most
// when sort_memory is not set.
const DefaultSortMemory int64 = 512 << 20

// minSortMemory is the smallest sort_memory accepted.
const minSortMemory int64 = 1 << 20

// SortColumn is one term of a sort order in Spark's syntax.
type SortColumn struct {
	Name       string
	Desc       bool
	NullsFirst bool
}

// ParseSortOrder parses a sort order in Spark's syntax: terms separated by
// commas, each a column name (in backquotes if it needs them), then ASC
// (the default) or DESC, then NULLS FIRST or NULLS LAST (the default is
// NULLS FIRST for ASC and NULLS LAST for DESC, as in Spark and Iceberg).
// Keywords are case-insensitive; transforms are not accepted.
func ParseSortOrder(s string) ([]SortColumn, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty sort order")
	}
	var out []SortColumn
	seen := map[string]bool{}
	for i, term := range splitTerms(s) {
		words, err := sortWords(term)
		if err != nil {
			return nil, fmt.Errorf("term %d %q: %w", i+1, strings.TrimSpace(term), err)
		}
		if len(words) == 0 {
			return nil, fmt.Errorf("term %d is empty", i+1)
		}
		c := SortColumn{Name: words[0]}
		rest := words[1:]
		if len(rest) > 0 {
			switch strings.ToUpper(rest[0]) {
			case "ASC":
				rest = rest[1:]
			case "DESC":
				c.Desc, rest = true, rest[1:]
			}
		}
		c.NullsFirst = !c.Desc
		if len(rest) > 0 {
			if len(rest) != 2 || !strings.EqualFold(rest[0], "NULLS") {
				return nil, fmt.Errorf("term %d %q: want column [ASC|DESC] [NULLS FIRST|NULLS LAST]", i+1, strings.TrimSpace(term))
			}
			switch strings.ToUpper(rest[1]) {
			case "FIRST":
				c.NullsFirst = true
			case "LAST":
				c.NullsFirst = false
			default:
				return nil, fmt.Errorf("term %d %q: NULLS must be followed by FIRST or LAST", i+1, strings.TrimSpace(term))
			}
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("column %q appears twice", c.Name)
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	return out, nil
}

// splitTerms splits s at the commas outside backquotes.
func splitTerms(s string) []string {
	var terms []string
	quoted, start := false, 0
	for i, r := range s {
		switch {
		case r == '`':
			quoted = !quoted
		case r == ',' && !quoted:
			terms = append(terms, s[start:i])
			start = i + 1
		}
	}
	return append(terms, s[start:])
}

// sortWords splits one term into words; a backquoted word may hold any
// character, “ standing for a backquote.
func sortWords(term string) ([]string, error) {
	var words []string
	rs := []rune(term)
	for i := 0; i < len(rs); {
		switch r := rs[i]; {
		case r == ' ' || r == '\t' || r == '\n':
			i++
		case r == '`':
			var b strings.Builder
			i++
			for {
				if i >= len(rs) {
					return nil, fmt.Errorf("unterminated backquote")
				}
				if rs[i] == '`' {
					if i+1 < len(rs) && rs[i+1] == '`' {
						b.WriteRune('`')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteRune(rs[i])
				i++
			}
			if b.Len() == 0 {
				return nil, fmt.Errorf("empty column name")
			}
			words = append(words, b.String())
		default:
			j := i
			for j < len(rs) && rs[j] != ' ' && rs[j] != '\t' && rs[j] != '\n' && rs[j] != '`' {
				if rs[j] == '(' || rs[j] == ')' {
					return nil, fmt.Errorf("transforms are not supported, only column names")
				}
				j++
			}
			words = append(words, string(rs[i:j]))
			i = j
		}
	}
	return words, nil
}

// validateSort checks the sort keys of c into v.
func (c Config) validateSort(v *validate.Collector) {
	switch c.Strategy {
	case "", StrategyBinpack:
		if c.SortOrder != "" {
			v.Add("sort_order", c.SortOrder, "needs strategy: sort")
		}
	case StrategySort:
		if c.SortOrder == "" {
			v.Add("sort_order", c.SortOrder, "is required with strategy: sort")
		} else if _, err := ParseSortOrder(c.SortOrder); err != nil {
			v.Add("sort_order", c.SortOrder, err.Error())
		}
	default:
		v.Add("strategy", c.Strategy, "must be binpack or sort (zorder is not supported)")
	}
	if c.SortMemory < 0 {
		v.Add("sort_memory", c.SortMemory, "must not be negative")
	} else if c.SortMemory > 0 && c.SortMemory < minSortMemory {
		v.Add("sort_memory", c.SortMemory, "must be at least 1MiB")
	}
}

// sortSpec is the order a plan's groups are written in, resolved against
// the table's current schema.
type sortSpec struct {
	// orderID is the table's sort order written, recorded on every data
	// file; nil when the order is the config's, which the table's metadata
	// does not hold.
	orderID *int
	keys    []sortKey
	// memory bounds the decoded rows of one sort group.
	memory int64
	// source says where the order came from, for logs and plan output.
	source string
}

type sortKey struct {
	name       string // the top-level column
	desc       bool
	nullsFirst bool
}

// String is the order in Spark's syntax.
func (s *sortSpec) String() string {
	var b strings.Builder
	for i, k := range s.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.name)
		if k.desc {
			b.WriteString(" DESC")
		}
		if k.nullsFirst == k.desc {
			if k.nullsFirst {
				b.WriteString(" NULLS FIRST")
			} else {
				b.WriteString(" NULLS LAST")
			}
		}
	}
	return b.String()
}

// planSort resolves the order compaction writes tbl's files in: the
// table's own sort order when it has one, else, with strategy: sort, the
// config's sort_order; nil means bin-pack (the files are written in the
// order they are read). A column that is not in the current schema, or of
// a type the sort does not support, is an error naming it. A table order
// with a transform other than identity is not applied (nil, as before:
// iceberg-go's writer sorts each batch by it) unless strategy is sort,
// which then fails.
func planSort(meta table.Metadata, cfg Config) (*sortSpec, error) {
	mem := cfg.SortMemory
	if mem <= 0 {
		mem = DefaultSortMemory
	}
	sc := meta.CurrentSchema()
	if id := meta.DefaultSortOrder(); id != table.UnsortedSortOrderID {
		order := meta.SortOrder()
		spec := &sortSpec{orderID: &id, memory: mem, source: fmt.Sprintf("table sort order %d", id)}
		for _, f := range order.Fields() {
			col, ok := sc.FindFieldByID(f.SourceID())
			if !ok {
				return nil, fmt.Errorf("sort order %d: source column id %d is not in the current schema", id, f.SourceID())
			}
			name, _ := sc.FindColumnName(f.SourceID())
			if _, ident := f.Transform.(iceberg.IdentityTransform); !ident {
				if cfg.Strategy == StrategySort {
					return nil, fmt.Errorf("sort order %d: column %q: transform %s is not supported (only identity)", id, name, f.Transform)
				}
				return nil, nil
			}
			if err := sortable(sc, name, col); err != nil {
				return nil, err
			}
			spec.keys = append(spec.keys, sortKey{name: name, desc: f.Direction == table.SortDESC, nullsFirst: f.NullOrder == table.NullsFirst})
		}
		return spec, nil
	}
	if cfg.Strategy != StrategySort {
		return nil, nil
	}
	cols, err := ParseSortOrder(cfg.SortOrder)
	if err != nil {
		return nil, fmt.Errorf("sort_order %q: %w", cfg.SortOrder, err)
	}
	spec := &sortSpec{memory: mem, source: "sort_order"}
	for _, c := range cols {
		col, ok := sc.FindFieldByName(c.Name)
		if !ok {
			return nil, fmt.Errorf("sort_order %q: column %q does not exist in the table's schema", cfg.SortOrder, c.Name)
		}
		if err := sortable(sc, c.Name, col); err != nil {
			return nil, fmt.Errorf("sort_order %q: %w", cfg.SortOrder, err)
		}
		spec.keys = append(spec.keys, sortKey{name: c.Name, desc: c.Desc, nullsFirst: c.NullsFirst})
	}
	return spec, nil
}

// sortable says whether column name, field col of sc, can be sorted by:
// a top-level column of a primitive type the sort compares.
func sortable(sc *iceberg.Schema, name string, col iceberg.NestedField) error {
	top := false
	for _, f := range sc.Fields() {
		if f.ID == col.ID {
			top = true
		}
	}
	if !top {
		return fmt.Errorf("column %q: only top-level columns can be sorted by", name)
	}
	switch col.Type.(type) {
	case iceberg.Int32Type, iceberg.Int64Type, iceberg.Float32Type, iceberg.Float64Type,
		iceberg.StringType, iceberg.BinaryType, iceberg.FixedType, iceberg.DateType, iceberg.TimeType,
		iceberg.TimestampType, iceberg.TimestampTzType, iceberg.DecimalType, iceberg.BooleanType:
		return nil
	}
	return fmt.Errorf("column %q: sorting by type %s is not supported", name, col.Type)
}

// candidates is every file of a partition chosen for a sort: as Spark's sort
// strategy, a sort rewrites all the files of what it selects, so that the
// partition ends sorted rather than its small files only.
func (s *sortSpec) candidates(strategy string, all, cands []table.FileScanTask, bytes int64) ([]table.FileScanTask, int64) {
	if s == nil || strategy != StrategySort {
		return cands, bytes
	}
	bytes = 0
	for _, t := range all {
		bytes += t.File.FileSizeBytes()
	}
	return all, bytes
}
