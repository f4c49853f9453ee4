// Package rowfilter parses the SQL-like row filters of the configuration
// (compaction's where) into iceberg-go expressions. It knows nothing of
// compaction: any part that filters rows by a user's expression can use it.
package rowfilter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/iceberg-go"
)

// Parse parses a SQL-like row filter, as written for Spark's
// rewrite_data_files(where => ...), into an unbound iceberg-go expression.
// The result is bound to a table schema later (iceberg.BindExpr, or a scan's
// row filter), which is when column names and literal types are checked.
//
// Grammar (keywords are case-insensitive; OR binds loosest, then AND, then
// NOT, then the comparisons):
//
//	filter     := or
//	or         := and { OR and }
//	and        := not { AND not }
//	not        := NOT not | primary
//	primary    := "(" or ")" | TRUE | FALSE | predicate
//	predicate  := column op value | value op column
//	            | column IS [NOT] NULL
//	            | column [NOT] IN "(" value { "," value } ")"
//	            | column [NOT] BETWEEN value AND value
//	            | column [NOT] LIKE 'prefix%'
//	op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	column     := name { "." name }      (a.b names a nested field)
//	name       := identifier | `back quoted` | "double quoted"
//	value      := 'string' | integer | decimal | TRUE | FALSE
//	            | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.f]]][zone]'
//	            | relative
//	relative   := (CURRENT_DATE ["(" ['zone'] ")"] | CURRENT_TIMESTAMP ["()"]) { ("+" | "-") amount }
//	amount     := integer                      (days; CURRENT_DATE only)
//	            | INTERVAL integer unit | INTERVAL 'integer' unit | INTERVAL 'integer unit'
//	unit       := SECOND | MINUTE | HOUR | DAY | WEEK | MONTH | YEAR  (or the plural)
//
// Strings use single quotes, and a single quote inside a string is written
// twice. Integers become 64-bit long literals, numbers with a fraction or
// exponent become doubles; both are converted to the column's type at bind
// time. "value op column"
// is turned around, so 5 < x means x > 5. BETWEEN is inclusive at both ends;
// NOT BETWEEN becomes x < lo OR x > hi. LIKE supports only a pattern whose
// sole wildcard is one trailing % (StartsWith); \% \_ and \\ escape a
// literal %, _ or \ in the prefix. A bare identifier that is one of the
// keywords above (AND, OR, NOT, IS, NULL, IN, BETWEEN, LIKE, TRUE, FALSE)
// must be quoted to be used as a column name.
//
// Dates and timestamps are written as strings ('2024-01-01') and stay
// strings until binding, where iceberg-go converts them to the column's
// type. iceberg-go on its own only converts 'yyyy-mm-ddThh:mm:ss[.f]' to a
// timestamp, so '2024-01-01' or '2024-01-01 10:00:00' would fail to bind to
// a timestamp column. String values that parse as a date or date-time are
// therefore kept in a string literal whose conversion to the timestamp
// types also accepts a bare date (midnight), a space instead of the T,
// minutes without seconds, and a zone offset (Z, +hh:mm) for timestamptz
// columns; a zoneless value on a timestamptz column is taken as UTC, and a
// value with an offset on a timestamp (without zone) column is an error.
// Against every other column type such a literal behaves exactly like
// iceberg.StringLiteral.
//
// Relative dates (CURRENT_DATE - 1, CURRENT_TIMESTAMP - INTERVAL 6 HOURS)
// are resolved when the filter is parsed, in UTC, the zone of Iceberg's day
// and hour partition transforms: Parse uses the clock, Resolve a given
// time. CURRENT_DATE is today's date (midnight UTC against a timestamp
// column) and moves by days, weeks, months or years; CURRENT_DATE('zone')
// is today's date in that IANA zone, for date columns that hold local
// dates. CURRENT_TIMESTAMP is the time to the microsecond and moves by any
// unit. A column named current_date or current_timestamp must be quoted.
//
// Errors are *Error values naming the 1-based character position and
// the offending token, e.g.
//
//	where: expected a value after "=" at position 12, got end of input
func Parse(s string) (iceberg.BooleanExpression, error) {
	expr, _, err := parse(s, time.Now())
	return expr, err
}

// parse parses s with relative dates resolved at now, and returns where
// each relative date was written and what it resolved to.
func parse(s string, now time.Time) (iceberg.BooleanExpression, []relSpan, error) {
	toks, err := lexWhere(s)
	if err != nil {
		return nil, nil, err
	}
	p := &whereParser{src: s, toks: toks, now: now.UTC()}
	if p.peek().kind == tkEOF {
		return nil, nil, p.errAt(p.peek(), "empty filter", "")
	}
	expr, err := p.parseOr()
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tkEOF {
		if t.kind == tkRParen {
			return nil, nil, p.errAt(t, `unbalanced ")"`, "")
		}
		return nil, nil, p.errAt(t, "expected AND, OR or end of input", "")
	}
	return expr, p.rel, nil
}

// Error is a syntax error in a where filter.
type Error struct {
	Pos   int    // 1-based character position of Token; end of input is len+1
	Token string // the offending token as written; "" means end of input
	Msg   string // what was expected, e.g. `expected a value after "="`
	Hint  string // optional advice, e.g. how to write what was meant
}

func (e *Error) Error() string {
	got := "end of input"
	if e.Token != "" {
		got = displayToken(e.Token)
	}
	msg := fmt.Sprintf("where: %s at position %d, got %s", e.Msg, e.Pos, got)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// displayToken quotes a token for an error message; strings and quoted
// identifiers already carry their delimiters.
func displayToken(s string) string {
	const maxLen = 40
	if utf8.RuneCountInString(s) > maxLen {
		s = string([]rune(s)[:maxLen]) + "..."
	}
	switch s[0] {
	case '\'', '"', '`':
		return s
	}
	return strconv.Quote(s)
}

type tokenKind int

const (
	tkEOF    tokenKind = iota
	tkIdent            // bare word, possibly a keyword
	tkQIdent           // `quoted` or "quoted" identifier
	tkString           // 'string'
	tkNumber
	tkOp // comparison operator
	tkLParen
	tkRParen
	tkComma
	tkDot
	tkSign // + or - not starting a number: date arithmetic
)

type token struct {
	kind tokenKind
	text string // as written
	val  string // unescaped content of a string or quoted identifier
	pos  int    // byte offset in the source
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
func isDigit(b byte) bool      { return b >= '0' && b <= '9' }

// whereErr builds an error for the token that starts at byte offset off.
func whereErr(src string, off int, tok, msg, hint string) *Error {
	return &Error{Pos: utf8.RuneCountInString(src[:off]) + 1, Token: tok, Msg: msg, Hint: hint}
}

func lexWhere(s string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(s) {
			r, w := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += w
		}
		if i >= len(s) {
			return append(toks, token{kind: tkEOF, pos: len(s)}), nil
		}
		start := i
		c := s[i]
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		afterName := len(toks) > 0 && (toks[len(toks)-1].kind == tkIdent || toks[len(toks)-1].kind == tkQIdent)
		var tok token
		switch {
		case c == '(':
			tok, i = token{kind: tkLParen, text: "("}, i+1
		case c == ')':
			tok, i = token{kind: tkRParen, text: ")"}, i+1
		case c == ',':
			tok, i = token{kind: tkComma, text: ","}, i+1
		case c == '=':
			if next == '=' {
				tok, i = token{kind: tkOp, text: "=="}, i+2
			} else {
				tok, i = token{kind: tkOp, text: "="}, i+1
			}
		case c == '!':
			if next != '=' {
				return nil, whereErr(s, start, "!", `unexpected character, "!" must be followed by "="`, "")
			}
			tok, i = token{kind: tkOp, text: "!="}, i+2
		case c == '<':
			switch next {
			case '=', '>':
				tok, i = token{kind: tkOp, text: s[i : i+2]}, i+2
			default:
				tok, i = token{kind: tkOp, text: "<"}, i+1
			}
		case c == '>':
			if next == '=' {
				tok, i = token{kind: tkOp, text: ">="}, i+2
			} else {
				tok, i = token{kind: tkOp, text: ">"}, i+1
			}
		case c == '\'':
			val, end, ok := scanQuoted(s, i, '\'')
			if !ok {
				return nil, whereErr(s, start, s[start:], "unterminated string", "close it with '")
			}
			tok, i = token{kind: tkString, text: s[start:end], val: val}, end
		case c == '`' || c == '"':
			val, end, ok := scanQuoted(s, i, c)
			if !ok {
				return nil, whereErr(s, start, s[start:], "unterminated quoted identifier", "close it with "+string(c))
			}
			if val == "" {
				return nil, whereErr(s, start, s[start:end], "empty quoted identifier", "")
			}
			tok, i = token{kind: tkQIdent, text: s[start:end], val: val}, end
		case isDigit(c),
			c == '.' && isDigit(next) && !afterName,
			(c == '-' || c == '+') && (isDigit(next) || next == '.' && i+2 < len(s) && isDigit(s[i+2])):
			end, ok := scanNumber(s, i)
			if !ok {
				return nil, whereErr(s, start, s[start:end], "malformed number", "")
			}
			tok, i = token{kind: tkNumber, text: s[start:end]}, end
		case c == '-' || c == '+':
			tok, i = token{kind: tkSign, text: string(c)}, i+1
		case c == '.':
			tok, i = token{kind: tkDot, text: "."}, i+1
		default:
			r, w := utf8.DecodeRuneInString(s[i:])
			if !isIdentStart(r) {
				return nil, whereErr(s, start, string(r), "unexpected character", "")
			}
			i += w
			for i < len(s) {
				r, w := utf8.DecodeRuneInString(s[i:])
				if !isIdentPart(r) {
					break
				}
				i += w
			}
			tok = token{kind: tkIdent, text: s[start:i]}
		}
		tok.pos = start
		toks = append(toks, tok)
	}
}

// scanQuoted reads a string delimited by q starting at s[start] == q, where
// a doubled q stands for one q. It returns the content and the offset just
// past the closing delimiter.
func scanQuoted(s string, start int, q byte) (val string, end int, ok bool) {
	var b strings.Builder
	i := start + 1
	for i < len(s) {
		j := strings.IndexByte(s[i:], q)
		if j < 0 {
			return "", len(s), false
		}
		b.WriteString(s[i : i+j])
		i += j + 1
		if i < len(s) && s[i] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i, true
	}
	return "", len(s), false
}

// scanNumber reads [+-] digits [. digits] [e [+-] digits] from s[start]. A
// number running into letters (5L, 1e, 0x1F) is malformed; end then covers
// the whole run so the error shows it.
func scanNumber(s string, start int) (end int, ok bool) {
	i := start
	if s[i] == '-' || s[i] == '+' {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	ok = digits > 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		expDigits := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			expDigits++
		}
		ok = ok && expDigits > 0
	}
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !isIdentPart(r) && r != '.' {
			break
		}
		ok = false
		i += w
	}
	return i, ok
}

// reservedWords cannot be bare column names.
var reservedWords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true,
	"BETWEEN": true, "LIKE": true, "TRUE": true, "FALSE": true,
	"CURRENT_DATE": true, "CURRENT_TIMESTAMP": true,
}

// maxWhereDepth bounds nesting of parentheses and NOT, so a hostile filter
// cannot exhaust the stack.
const maxWhereDepth = 500

type whereParser struct {
	src   string
	toks  []token
	i     int
	depth int
	now   time.Time // what relative dates resolve against, in UTC
	rel   []relSpan // the relative dates parsed, in source order
}

func (p *whereParser) peek() token { return p.toks[p.i] }

func (p *whereParser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *whereParser) next() token {
	t := p.toks[p.i]
	if t.kind != tkEOF {
		p.i++
	}
	return t
}

func (p *whereParser) errAt(t token, msg, hint string) *Error {
	return whereErr(p.src, t.pos, t.text, msg, hint)
}

func isKeyword(t token, kw string) bool {
	return t.kind == tkIdent && strings.EqualFold(t.text, kw)
}

func (p *whereParser) enter(t token) error {
	p.depth++
	if p.depth > maxWhereDepth {
		return p.errAt(t, fmt.Sprintf("filter nested more than %d deep", maxWhereDepth), "")
	}
	return nil
}

func (p *whereParser) parseOr() (iceberg.BooleanExpression, error) {
	left, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for isKeyword(p.peek(), "OR") {
		p.next()
		right, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		left = iceberg.NewOr(left, right)
	}
	return left, nil
}

func (p *whereParser) parseAnd() (iceberg.BooleanExpression, error) {
	left, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for isKeyword(p.peek(), "AND") {
		p.next()
		right, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		left = iceberg.NewAnd(left, right)
	}
	return left, nil
}

func (p *whereParser) parseNot() (iceberg.BooleanExpression, error) {
	if t := p.peek(); isKeyword(t, "NOT") {
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		child, err := p.parseNot()
		p.depth--
		if err != nil {
			return nil, err
		}
		return iceberg.NewNot(child), nil
	}
	return p.parsePrimary()
}

func (p *whereParser) parsePrimary() (iceberg.BooleanExpression, error) {
	t := p.peek()
	switch {
	case t.kind == tkLParen:
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		p.depth--
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c.kind != tkRParen {
			return nil, p.errAt(c, `expected ")"`, fmt.Sprintf(`to close the "(" at position %d`,
				utf8.RuneCountInString(p.src[:t.pos])+1))
		}
		p.next()
		return e, nil
	case (isKeyword(t, "TRUE") || isKeyword(t, "FALSE")) && p.peekAt(1).kind != tkOp:
		p.next()
		if isKeyword(t, "TRUE") {
			return iceberg.AlwaysTrue{}, nil
		}
		return iceberg.AlwaysFalse{}, nil
	case t.kind == tkString, t.kind == tkNumber, isKeyword(t, "TRUE"), isKeyword(t, "FALSE"),
		p.isTypedLiteral(), isRelative(t):
		return p.parseValueFirst()
	case t.kind == tkQIdent, t.kind == tkIdent && !reservedWords[strings.ToUpper(t.text)]:
		col, err := p.parseColumn()
		if err != nil {
			return nil, err
		}
		return p.parseColumnPredicate(col)
	case t.kind == tkEOF:
		return nil, p.errAt(t, "expected a condition", "")
	default:
		hint := ""
		if t.kind == tkIdent {
			hint = "quote a column named like a keyword: `" + t.text + "`"
		}
		return nil, p.errAt(t, "expected a condition", hint)
	}
}

// isTypedLiteral reports whether the next tokens are DATE '...' or
// TIMESTAMP '...'. A DATE or TIMESTAMP not followed by a string is a column.
func (p *whereParser) isTypedLiteral() bool {
	t := p.peek()
	return (isKeyword(t, "DATE") || isKeyword(t, "TIMESTAMP")) && p.peekAt(1).kind == tkString
}

// parseColumn reads name { "." name } and returns the dotted field name.
func (p *whereParser) parseColumn() (string, error) {
	t := p.next()
	var parts []string
	switch {
	case t.kind == tkQIdent:
		parts = append(parts, t.val)
	case t.kind == tkIdent && !reservedWords[strings.ToUpper(t.text)]:
		parts = append(parts, t.text)
	default:
		return "", p.errAt(t, "expected a column name", "")
	}
	for p.peek().kind == tkDot {
		dot := p.next()
		f := p.next()
		switch f.kind {
		case tkIdent:
			parts = append(parts, f.text)
		case tkQIdent:
			parts = append(parts, f.val)
		default:
			return "", p.errAt(f, fmt.Sprintf("expected a field name after %q", dot.text), "")
		}
	}
	return strings.Join(parts, "."), nil
}

var whereOps = map[string]iceberg.Operation{
	"=": iceberg.OpEQ, "==": iceberg.OpEQ, "!=": iceberg.OpNEQ, "<>": iceberg.OpNEQ,
	"<": iceberg.OpLT, "<=": iceberg.OpLTEQ, ">": iceberg.OpGT, ">=": iceberg.OpGTEQ,
}

// parseColumnPredicate parses what follows a column name.
func (p *whereParser) parseColumnPredicate(col string) (iceberg.BooleanExpression, error) {
	ref := iceberg.Reference(col)
	t := p.next()
	switch {
	case t.kind == tkOp:
		lit, err := p.parseValue(t)
		if err != nil {
			return nil, err
		}
		return iceberg.LiteralPredicate(whereOps[t.text], ref, lit), nil
	case isKeyword(t, "IS"):
		negate := false
		if isKeyword(p.peek(), "NOT") {
			p.next()
			negate = true
		}
		if n := p.next(); !isKeyword(n, "NULL") {
			return nil, p.errAt(n, fmt.Sprintf("expected NULL or NOT NULL after %q", t.text), "")
		}
		if negate {
			return iceberg.NotNull(ref), nil
		}
		return iceberg.IsNull(ref), nil
	case isKeyword(t, "NOT"):
		n := p.next()
		switch {
		case isKeyword(n, "IN"):
			return p.parseIn(ref, n, true)
		case isKeyword(n, "BETWEEN"):
			return p.parseBetween(ref, n, true)
		case isKeyword(n, "LIKE"):
			return p.parseLike(ref, n, true)
		}
		return nil, p.errAt(n, fmt.Sprintf("expected IN, BETWEEN or LIKE after %q", t.text), "")
	case isKeyword(t, "IN"):
		return p.parseIn(ref, t, false)
	case isKeyword(t, "BETWEEN"):
		return p.parseBetween(ref, t, false)
	case isKeyword(t, "LIKE"):
		return p.parseLike(ref, t, false)
	}
	return nil, p.errAt(t, fmt.Sprintf(
		"expected a comparison operator, IS, IN, BETWEEN or LIKE after column %q", col), "")
}

// parseValueFirst parses "value op column", turning it around.
func (p *whereParser) parseValueFirst() (iceberg.BooleanExpression, error) {
	lit, err := p.parseValue(token{})
	if err != nil {
		return nil, err
	}
	op := p.next()
	if op.kind != tkOp {
		return nil, p.errAt(op, "expected a comparison operator after the value", "")
	}
	if c := p.peek(); c.kind != tkQIdent && (c.kind != tkIdent || reservedWords[strings.ToUpper(c.text)]) {
		hint := ""
		if c.kind == tkString || c.kind == tkNumber || isKeyword(c, "TRUE") || isKeyword(c, "FALSE") {
			hint = "a condition must compare a column with a value"
		}
		return nil, p.errAt(c, fmt.Sprintf("expected a column name after %q", op.text), hint)
	}
	col, err := p.parseColumn()
	if err != nil {
		return nil, err
	}
	o := whereOps[op.text]
	if o != iceberg.OpEQ && o != iceberg.OpNEQ {
		o = o.FlipLR()
	}
	return iceberg.LiteralPredicate(o, iceberg.Reference(col), lit), nil
}

// parseValue parses one literal value; after is the token it follows, for
// error messages (zero at the start of a condition).
func (p *whereParser) parseValue(after token) (iceberg.Literal, error) {
	t := p.next()
	expected := "expected a value"
	if after.text != "" {
		expected = fmt.Sprintf("expected a value after %q", after.text)
	}
	switch t.kind {
	case tkString:
		return newWhereStringLiteral(t.val), nil
	case tkNumber:
		return p.numberLiteral(t)
	case tkQIdent:
		hint := "comparing two columns is not supported"
		if t.text[0] == '"' {
			hint = "double quotes name a column; write string values in single quotes"
		}
		return nil, p.errAt(t, expected, hint)
	case tkIdent:
		switch strings.ToUpper(t.text) {
		case "TRUE":
			return iceberg.NewLiteral(true), nil
		case "FALSE":
			return iceberg.NewLiteral(false), nil
		case "NULL":
			return nil, p.errAt(t, expected, "NULL never compares equal; use IS NULL or IS NOT NULL")
		case "DATE", "TIMESTAMP":
			if s := p.peek(); s.kind == tkString {
				p.next()
				return p.typedLiteral(t, s)
			}
		case "CURRENT_DATE", "CURRENT_TIMESTAMP":
			return p.parseRelative(t)
		}
		hint := "comparing two columns is not supported"
		if reservedWords[strings.ToUpper(t.text)] {
			hint = ""
		}
		return nil, p.errAt(t, expected, hint)
	}
	return nil, p.errAt(t, expected, "")
}

func (p *whereParser) numberLiteral(t token) (iceberg.Literal, error) {
	if !strings.ContainsAny(t.text, ".eE") {
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, p.errAt(t, "integer out of the 64-bit range", "")
		}
		return iceberg.NewLiteral(n), nil
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil {
		return nil, p.errAt(t, "number out of the double range", "")
	}
	return iceberg.NewLiteral(f), nil
}

// typedLiteral checks DATE '...' / TIMESTAMP '...' and returns the value as
// a date-time string literal, which binds to date and timestamp columns.
func (p *whereParser) typedLiteral(kw, s token) (iceberg.Literal, error) {
	if strings.EqualFold(kw.text, "DATE") {
		if _, err := time.Parse(time.DateOnly, s.val); err != nil {
			return nil, p.errAt(s, "invalid DATE literal", "expected 'yyyy-mm-dd'")
		}
	} else if _, _, ok := parseWhereTime(s.val); !ok {
		return nil, p.errAt(s, "invalid TIMESTAMP literal",
			"expected 'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][Z|+hh:mm]'")
	}
	return whereTimeLiteral{iceberg.StringLiteral(s.val)}, nil
}

func (p *whereParser) parseIn(ref iceberg.Reference, in token, negate bool) (iceberg.BooleanExpression, error) {
	open := p.next()
	if open.kind != tkLParen {
		return nil, p.errAt(open, fmt.Sprintf(`expected "(" after %q`, in.text), "")
	}
	if c := p.peek(); c.kind == tkRParen {
		return nil, p.errAt(c, "empty IN list", "")
	}
	var lits []iceberg.Literal
	after := open
	for {
		lit, err := p.parseValue(after)
		if err != nil {
			return nil, err
		}
		lits = append(lits, lit)
		sep := p.next()
		if sep.kind == tkRParen {
			break
		}
		if sep.kind != tkComma {
			return nil, p.errAt(sep, `expected "," or ")" in the IN list`, "")
		}
		after = sep
	}
	op := iceberg.OpIn
	if negate {
		op = iceberg.OpNotIn
	}
	return iceberg.SetPredicate(op, ref, lits), nil
}

func (p *whereParser) parseBetween(ref iceberg.Reference, between token, negate bool) (iceberg.BooleanExpression, error) {
	lo, err := p.parseValue(between)
	if err != nil {
		return nil, err
	}
	and := p.next()
	if !isKeyword(and, "AND") {
		return nil, p.errAt(and, fmt.Sprintf("expected AND between the bounds of %q", between.text), "")
	}
	hi, err := p.parseValue(and)
	if err != nil {
		return nil, err
	}
	if negate {
		return iceberg.NewOr(iceberg.LiteralPredicate(iceberg.OpLT, ref, lo),
			iceberg.LiteralPredicate(iceberg.OpGT, ref, hi)), nil
	}
	return iceberg.NewAnd(iceberg.LiteralPredicate(iceberg.OpGTEQ, ref, lo),
		iceberg.LiteralPredicate(iceberg.OpLTEQ, ref, hi)), nil
}

func (p *whereParser) parseLike(ref iceberg.Reference, like token, negate bool) (iceberg.BooleanExpression, error) {
	t := p.next()
	if t.kind != tkString {
		return nil, p.errAt(t, fmt.Sprintf("expected a quoted pattern after %q", like.text), "")
	}
	prefix, msg, hint := likePrefix(t.val)
	if msg != "" {
		return nil, p.errAt(t, msg, hint)
	}
	if prefix == "" { // '%' matches every non-null value
		if negate {
			return iceberg.AlwaysFalse{}, nil
		}
		return iceberg.NotNull(ref), nil
	}
	if negate {
		return iceberg.NotStartsWith(ref, prefix), nil
	}
	return iceberg.StartsWith(ref, prefix), nil
}

// likePrefix returns the prefix of a 'prefix%' pattern, or an error message.
func likePrefix(pat string) (prefix, msg, hint string) {
	var b strings.Builder
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '\\':
			if i+1 == len(rs) || (rs[i+1] != '%' && rs[i+1] != '_' && rs[i+1] != '\\') {
				return "", "invalid escape in LIKE pattern", `only \%, \_ and \\ are escapes`
			}
			i++
			b.WriteRune(rs[i])
		case '%':
			if i != len(rs)-1 {
				return "", "unsupported LIKE pattern", "only a single trailing % wildcard is supported"
			}
			return b.String(), "", ""
		case '_':
			return "", "unsupported LIKE pattern", `the _ wildcard is not supported; write \_ for a literal _`
		default:
			b.WriteRune(r)
		}
	}
	return "", "unsupported LIKE pattern", "a pattern must end in %; use = for an exact match"
}

// newWhereStringLiteral returns a string literal; one holding a date or
// date-time gets the lenient timestamp conversion of whereTimeLiteral.
func newWhereStringLiteral(s string) iceberg.Literal {
	if _, _, ok := parseWhereTime(s); ok {
		return whereTimeLiteral{iceberg.StringLiteral(s)}
	}
	return iceberg.NewLiteral(s)
}

// whereTimeLiteral is a string literal holding a date or date-time. It is an
// iceberg.StringLiteral in every respect (String, Type, JSON and binary
// form, conversion to string, date and other types) except that To on the
// timestamp types accepts the forms parseWhereTime does, where
// iceberg.StringLiteral requires 'yyyy-mm-ddThh:mm:ss'. Binding replaces it
// by an ordinary timestamp, date or string literal.
type whereTimeLiteral struct{ iceberg.StringLiteral }

func (l whereTimeLiteral) To(typ iceberg.Type) (iceberg.Literal, error) {
	switch typ.(type) {
	case iceberg.TimestampType, iceberg.TimestampNsType, iceberg.TimestampTzType, iceberg.TimestampTzNsType:
	default:
		return l.StringLiteral.To(typ)
	}
	tm, hasZone, ok := parseWhereTime(string(l.StringLiteral))
	if !ok {
		return l.StringLiteral.To(typ)
	}
	switch typ.(type) {
	case iceberg.TimestampType, iceberg.TimestampNsType:
		if hasZone {
			return nil, fmt.Errorf("%w: '%s' has a zone offset but the column is %s (without zone)",
				iceberg.ErrBadCast, string(l.StringLiteral), typ)
		}
	}
	switch typ.(type) {
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return iceberg.TimestampNsLiteral(tm.UnixNano()), nil
	}
	return iceberg.TimestampLiteral(tm.UnixMicro()), nil
}

func (l whereTimeLiteral) Equals(other iceberg.Literal) bool {
	o, ok := other.(whereTimeLiteral)
	return ok && o.StringLiteral == l.StringLiteral
}

var (
	whereTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05"}
	whereZoneLayouts = []string{
		"2006-01-02T15:04Z07:00", "2006-01-02T15:04:05Z07:00",
		"2006-01-02T15:04Z0700", "2006-01-02T15:04:05Z0700",
	}
)

// parseWhereTime parses yyyy-mm-dd, optionally followed by T or a space,
// hh:mm, optional :ss and fraction, and an optional zone (Z, +hh:mm, +hhmm).
// The time is in UTC; hasZone says whether the string named a zone.
func parseWhereTime(s string) (tm time.Time, hasZone, ok bool) {
	if len(s) < len(time.DateOnly) || !isDigit(s[0]) {
		return time.Time{}, false, false
	}
	if len(s) == len(time.DateOnly) {
		tm, err := time.Parse(time.DateOnly, s)
		return tm, false, err == nil
	}
	if s[10] == ' ' {
		s = s[:10] + "T" + s[11:]
	}
	for _, layout := range whereTimeLayouts {
		if tm, err := time.Parse(layout, s); err == nil {
			return tm, false, true
		}
	}
	for _, layout := range whereZoneLayouts {
		if tm, err := time.Parse(layout, s); err == nil {
			return tm.UTC(), true, true
		}
	}
	return time.Time{}, false, false
}
