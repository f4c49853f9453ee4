package compact

import (
	"fmt"
	"slices"
	"strconv"
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
	Name string
	// Transform is the term's transform of the column; nil: the column's
	// own values (identity).
	Transform  iceberg.Transform
	Desc       bool
	NullsFirst bool
}

// ParseSortOrder parses a sort order in Spark's syntax, as in ALTER TABLE
// ... WRITE ORDERED BY: terms separated by commas, each a column name (in
// backquotes if it needs them) or a transform of one, then ASC (the
// default) or DESC, then NULLS FIRST or NULLS LAST (the default is NULLS
// FIRST for ASC and NULLS LAST for DESC, as in Spark and Iceberg). The
// transforms are Iceberg's Spark functions: bucket(N, col),
// truncate(col, W) (or truncate(W, col)), years, months, days, hours (or
// year, month, day/date, hour/date_hour) of col, and identity(col).
// Keywords and transform names are case-insensitive. Whether a transform
// suits its column's type is checked against the table (planSort).
func ParseSortOrder(s string) ([]SortColumn, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty sort order")
	}
	var out []SortColumn
	seen := map[string]bool{}
	for i, term := range splitTerms(s) {
		c, err := parseSortTerm(term)
		if err != nil {
			if strings.TrimSpace(term) == "" {
				return nil, fmt.Errorf("term %d is empty", i+1)
			}
			return nil, fmt.Errorf("term %d %q: %w", i+1, strings.TrimSpace(term), err)
		}
		key := transformName(c.Transform) + "\x00" + c.Name
		if seen[key] {
			if c.Transform == nil {
				return nil, fmt.Errorf("column %q appears twice", c.Name)
			}
			return nil, fmt.Errorf("%s of column %q appears twice", c.Transform, c.Name)
		}
		seen[key] = true
		out = append(out, c)
	}
	return out, nil
}

// parseSortTerm parses one term: an expression, then the keywords.
func parseSortTerm(term string) (SortColumn, error) {
	toks, err := sortTokens(term)
	if err != nil {
		return SortColumn{}, err
	}
	if len(toks) == 0 {
		return SortColumn{}, fmt.Errorf("empty term")
	}
	var c SortColumn
	rest := toks[1:]
	if len(rest) > 0 && rest[0].is("(") {
		close := slices.IndexFunc(rest, func(t sortToken) bool { return t.is(")") })
		if close < 0 {
			return SortColumn{}, fmt.Errorf("unclosed parenthesis")
		}
		if toks[0].quoted {
			return SortColumn{}, fmt.Errorf("a transform name is not quoted")
		}
		if c.Name, c.Transform, err = parseTransform(toks[0].text, rest[1:close]); err != nil {
			return SortColumn{}, err
		}
		rest = rest[close+1:]
	} else {
		if !toks[0].word() {
			return SortColumn{}, fmt.Errorf("want a column or a transform, found %q", toks[0].text)
		}
		c.Name = toks[0].text
	}
	const want = "want column or transform(column) [ASC|DESC] [NULLS FIRST|NULLS LAST]"
	for _, t := range rest {
		if !t.word() || t.quoted {
			return SortColumn{}, fmt.Errorf("%s", want)
		}
	}
	if len(rest) > 0 {
		switch strings.ToUpper(rest[0].text) {
		case "ASC":
			rest = rest[1:]
		case "DESC":
			c.Desc, rest = true, rest[1:]
		}
	}
	c.NullsFirst = !c.Desc
	if len(rest) > 0 {
		if len(rest) != 2 || !strings.EqualFold(rest[0].text, "NULLS") {
			return SortColumn{}, fmt.Errorf("%s", want)
		}
		switch strings.ToUpper(rest[1].text) {
		case "FIRST":
			c.NullsFirst = true
		case "LAST":
			c.NullsFirst = false
		default:
			return SortColumn{}, fmt.Errorf("NULLS must be followed by FIRST or LAST")
		}
	}
	return c, nil
}

// parseTransform parses the transform name(args...) into its column and
// transform; identity is nil.
func parseTransform(name string, args []sortToken) (string, iceberg.Transform, error) {
	// The arguments, without the commas between them.
	var vals []sortToken
	for i, a := range args {
		if (i%2 == 1) != a.is(",") || (i%2 == 0 && !a.word()) {
			return "", nil, fmt.Errorf("%s: arguments must be a column or a number, separated by commas", name)
		}
		if i%2 == 0 {
			vals = append(vals, a)
		}
	}
	if len(args) > 0 && len(args)%2 == 0 {
		return "", nil, fmt.Errorf("%s: argument missing after the last comma", name)
	}
	column := func(t sortToken) (string, error) {
		if _, isNum := t.number(); isNum {
			return "", fmt.Errorf("%s: want a column, found the number %s", name, t.text)
		}
		return t.text, nil
	}
	switch lower := strings.ToLower(name); lower {
	case "bucket":
		if len(vals) != 2 {
			return "", nil, fmt.Errorf("bucket takes a number of buckets and a column: bucket(16, id)")
		}
		n, isNum := vals[0].number()
		if !isNum || n <= 0 {
			return "", nil, fmt.Errorf("bucket: the number of buckets must be a positive integer, found %q", vals[0].text)
		}
		col, err := column(vals[1])
		return col, iceberg.BucketTransform{NumBuckets: n}, err
	case "truncate":
		if len(vals) != 2 {
			return "", nil, fmt.Errorf("truncate takes a column and a width: truncate(name, 4)")
		}
		// Spark's truncate(col, width); Iceberg's DDL also takes
		// truncate(width, col), finding the width wherever it is.
		colTok, widthTok := vals[0], vals[1]
		if _, isNum := colTok.number(); isNum {
			colTok, widthTok = widthTok, colTok
		}
		w, isNum := widthTok.number()
		if !isNum || w <= 0 {
			return "", nil, fmt.Errorf("truncate: the width must be a positive integer, found %q", widthTok.text)
		}
		col, err := column(colTok)
		return col, iceberg.TruncateTransform{Width: w}, err
	}
	var tr iceberg.Transform
	switch strings.ToLower(name) {
	case "years", "year":
		tr = iceberg.YearTransform{}
	case "months", "month":
		tr = iceberg.MonthTransform{}
	case "days", "day", "date":
		tr = iceberg.DayTransform{}
	case "hours", "hour", "date_hour":
		tr = iceberg.HourTransform{}
	case "identity":
	default:
		return "", nil, fmt.Errorf("unknown transform %q (want bucket, truncate, years, months, days, hours or identity)", name)
	}
	if len(vals) != 1 {
		return "", nil, fmt.Errorf("%s takes one column: %s(ts)", name, strings.ToLower(name))
	}
	col, err := column(vals[0])
	return col, tr, err
}

// transformName is tr in Iceberg's spelling, identity when nil.
func transformName(tr iceberg.Transform) string {
	if tr == nil {
		return iceberg.IdentityTransform{}.String()
	}
	return tr.String()
}

// splitTerms splits s at the commas outside backquotes and parentheses.
func splitTerms(s string) []string {
	var terms []string
	quoted, depth, start := false, 0, 0
	for i, r := range s {
		switch {
		case r == '`':
			quoted = !quoted
		case quoted:
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth <= 0:
			terms = append(terms, s[start:i])
			start = i + 1
		}
	}
	return append(terms, s[start:])
}

// sortToken is a word (a name, a keyword or a number), a backquoted name,
// or one of the punctuation marks ( ) and ,.
type sortToken struct {
	text   string
	quoted bool
}

func (t sortToken) is(punct string) bool { return !t.quoted && t.text == punct }

func (t sortToken) word() bool { return t.quoted || !strings.ContainsAny(t.text, "(),") }

// number is the token as a positive int32, when it is one.
func (t sortToken) number() (int, bool) {
	if t.quoted {
		return 0, false
	}
	n, err := strconv.ParseInt(t.text, 10, 32)
	if err != nil {
		return 0, strings.Trim(t.text, "+-0123456789") == "" && t.text != ""
	}
	return int(n), true
}

// sortTokens splits one term into tokens; a backquoted name may hold any
// character, “ standing for a backquote.
func sortTokens(term string) ([]sortToken, error) {
	var toks []sortToken
	rs := []rune(term)
	for i := 0; i < len(rs); {
		switch r := rs[i]; {
		case r == ' ' || r == '\t' || r == '\n':
			i++
		case r == '(' || r == ')' || r == ',':
			toks = append(toks, sortToken{text: string(r)})
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
			toks = append(toks, sortToken{text: b.String(), quoted: true})
		default:
			j := i
			for j < len(rs) && !strings.ContainsRune(" \t\n`(),", rs[j]) {
				j++
			}
			toks = append(toks, sortToken{text: string(rs[i:j])})
			i = j
		}
	}
	return toks, nil
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
	name string // the top-level column
	// transform is the transform of the column's values the rows are
	// ordered by; nil: the values themselves (identity).
	transform iceberg.Transform
	// typ is the column's type, which the transform is applied to.
	typ        iceberg.Type
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
		b.WriteString(k.term())
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

// term is the key's column or transform in Spark's syntax.
func (k sortKey) term() string {
	switch t := k.transform.(type) {
	case nil, iceberg.IdentityTransform:
		return k.name
	case iceberg.BucketTransform:
		return fmt.Sprintf("bucket(%d, %s)", t.NumBuckets, k.name)
	case iceberg.TruncateTransform:
		return fmt.Sprintf("truncate(%s, %d)", k.name, t.Width)
	case iceberg.YearTransform:
		return "years(" + k.name + ")"
	case iceberg.MonthTransform:
		return "months(" + k.name + ")"
	case iceberg.DayTransform:
		return "days(" + k.name + ")"
	case iceberg.HourTransform:
		return "hours(" + k.name + ")"
	}
	return fmt.Sprintf("%s(%s)", k.transform, k.name)
}

// planSort resolves the order compaction writes tbl's files in: the
// table's own sort order when it has one, else, with strategy: sort, the
// config's sort_order; nil means bin-pack (the files are written in the
// order they are read). A column that is not in the current schema, or of
// a type the sort or its transform does not support, is an error naming
// it. A table order this sort cannot apply (a transform iceberg-go does
// not know, or one of several columns) is not applied (nil, as before:
// iceberg-go's writer sorts each batch by its source columns) unless
// strategy is sort, which then fails.
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
			tr := f.Transform
			if _, ident := tr.(iceberg.IdentityTransform); ident {
				tr = nil
			}
			if why := unsupportedTransform(tr, len(f.SourceIDs)); why != "" {
				if cfg.Strategy == StrategySort {
					return nil, fmt.Errorf("sort order %d: column %q: %s", id, name, why)
				}
				return nil, nil
			}
			if err := sortable(sc, name, col, tr); err != nil {
				return nil, fmt.Errorf("sort order %d: %w", id, err)
			}
			spec.keys = append(spec.keys, sortKey{name: name, transform: tr, typ: col.Type,
				desc: f.Direction == table.SortDESC, nullsFirst: f.NullOrder == table.NullsFirst})
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
		if err := sortable(sc, c.Name, col, c.Transform); err != nil {
			return nil, fmt.Errorf("sort_order %q: %w", cfg.SortOrder, err)
		}
		spec.keys = append(spec.keys, sortKey{name: c.Name, transform: c.Transform, typ: col.Type, desc: c.Desc, nullsFirst: c.NullsFirst})
	}
	return spec, nil
}

// unsupportedTransform says why a table's sort field of tr over sources
// columns cannot be applied; "" when it can.
func unsupportedTransform(tr iceberg.Transform, sources int) string {
	if sources > 1 {
		return fmt.Sprintf("transform %s of %d columns is not supported", tr, sources)
	}
	switch tr.(type) {
	case nil, iceberg.BucketTransform, iceberg.TruncateTransform, iceberg.YearTransform,
		iceberg.MonthTransform, iceberg.DayTransform, iceberg.HourTransform, iceberg.VoidTransform:
		return ""
	}
	return fmt.Sprintf("transform %s is not supported", tr)
}

// sortable says whether column name, field col of sc, can be sorted by
// under tr (nil: identity): a top-level column of a primitive type the
// sort compares, or that tr applies to.
func sortable(sc *iceberg.Schema, name string, col iceberg.NestedField, tr iceberg.Transform) error {
	top := false
	for _, f := range sc.Fields() {
		if f.ID == col.ID {
			top = true
		}
	}
	if !top {
		return fmt.Errorf("column %q: only top-level columns can be sorted by", name)
	}
	if tr != nil {
		if _, void := tr.(iceberg.VoidTransform); void {
			return nil // every row's key is null
		}
		if !tr.CanTransform(col.Type) {
			return fmt.Errorf("column %q: transform %s does not apply to type %s", name, tr, col.Type)
		}
		return nil
	}
	switch col.Type.(type) {
	case iceberg.Int32Type, iceberg.Int64Type, iceberg.Float32Type, iceberg.Float64Type,
		iceberg.StringType, iceberg.BinaryType, iceberg.FixedType, iceberg.DateType, iceberg.TimeType,
		iceberg.TimestampType, iceberg.TimestampTzType, iceberg.DecimalType, iceberg.BooleanType:
		return nil
	}
	return fmt.Errorf("column %q: sorting by type %s is not supported", name, col.Type)
}

// wholePartition reports whether a partition chosen for a rewrite is
// rewritten whole: as Spark's sort strategy, a sort rewrites all the files
// of what it selects, so that the partition ends sorted rather than its
// small files only.
func (s *sortSpec) wholePartition(strategy string) bool {
	return s != nil && strategy == StrategySort
}
