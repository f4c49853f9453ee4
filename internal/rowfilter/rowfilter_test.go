package rowfilter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
)

func ref(name string) iceberg.Reference { return iceberg.Reference(name) }

// tl is the literal Parse produces for a date or date-time string.
func tl(s string) iceberg.Literal { return whereTimeLiteral{iceberg.StringLiteral(s)} }

func lit(op iceberg.Operation, col string, l iceberg.Literal) iceberg.BooleanExpression {
	return iceberg.LiteralPredicate(op, ref(col), l)
}

// hasSet reports whether an expression contains a multi-value IN / NOT IN,
// whose String() lists the values in map order.
func hasSet(e iceberg.BooleanExpression) bool {
	s := e.String()
	return strings.Contains(s, "In(term=")
}

// sameExpr requires got to be want: Equals compares operations, terms and
// literals including their types (And/Or operands in either order, IN
// values as a set), and String() pins down the operand order too.
func sameExpr(t *testing.T, input string, got, want iceberg.BooleanExpression) {
	t.Helper()
	if !got.Equals(want) || (!hasSet(want) && got.String() != want.String()) {
		t.Errorf("Parse(%q)\n got: %s\nwant: %s", input, got, want)
	}
}

func TestParseWhere(t *testing.T) {
	a1 := iceberg.EqualTo(ref("a"), int64(1))
	b2 := iceberg.EqualTo(ref("b"), int64(2))
	c3 := iceberg.EqualTo(ref("c"), int64(3))

	tests := []struct {
		in   string
		want iceberg.BooleanExpression
	}{
		// comparison operators
		{"a = 1", a1},
		{"a == 1", a1},
		{"a != 1", iceberg.NotEqualTo(ref("a"), int64(1))},
		{"a <> 1", iceberg.NotEqualTo(ref("a"), int64(1))},
		{"a < 1", iceberg.LessThan(ref("a"), int64(1))},
		{"a <= 1", iceberg.LessThanEqual(ref("a"), int64(1))},
		{"a > 1", iceberg.GreaterThan(ref("a"), int64(1))},
		{"a >= 1", iceberg.GreaterThanEqual(ref("a"), int64(1))},
		{"a>=1", iceberg.GreaterThanEqual(ref("a"), int64(1))},
		{"  a\t=\n1  ", a1},

		// literals
		{"a = -5", iceberg.EqualTo(ref("a"), int64(-5))},
		{"a=-5", iceberg.EqualTo(ref("a"), int64(-5))},
		{"a = +5", iceberg.EqualTo(ref("a"), int64(5))},
		{"a = 9223372036854775807", iceberg.EqualTo(ref("a"), int64(9223372036854775807))},
		{"a = 1.5", iceberg.EqualTo(ref("a"), 1.5)},
		{"a = .5", iceberg.EqualTo(ref("a"), 0.5)},
		{"a = -0.25", iceberg.EqualTo(ref("a"), -0.25)},
		{"a = 1e3", iceberg.EqualTo(ref("a"), 1000.0)},
		{"a = -2.5E-1", iceberg.EqualTo(ref("a"), -0.25)},
		{"s = 'abc'", iceberg.EqualTo(ref("s"), "abc")},
		{"s = 'it''s'", iceberg.EqualTo(ref("s"), "it's")},
		{"s = ''", iceberg.EqualTo(ref("s"), "")},
		{"s = 'a AND b = 1'", iceberg.EqualTo(ref("s"), "a AND b = 1")},
		{"s = 'grüße'", iceberg.EqualTo(ref("s"), "grüße")},
		{"b = true", iceberg.EqualTo(ref("b"), true)},
		{"b = FALSE", iceberg.EqualTo(ref("b"), false)},
		{"d = '2024-01-01'", lit(iceberg.OpEQ, "d", tl("2024-01-01"))},
		{"ts < '2024-01-01 10:00:00'", lit(iceberg.OpLT, "ts", tl("2024-01-01 10:00:00"))},
		{"s = '2024-13-01'", iceberg.EqualTo(ref("s"), "2024-13-01")}, // not a date: plain string
		{"d = DATE '2024-01-01'", lit(iceberg.OpEQ, "d", tl("2024-01-01"))},
		{"ts >= timestamp '2024-01-01 10:00'", lit(iceberg.OpGTEQ, "ts", tl("2024-01-01 10:00"))},

		// value on the left is turned around
		{"5 < a", iceberg.GreaterThan(ref("a"), int64(5))},
		{"5 <= a", iceberg.GreaterThanEqual(ref("a"), int64(5))},
		{"5 > a", iceberg.LessThan(ref("a"), int64(5))},
		{"5 >= a", iceberg.LessThanEqual(ref("a"), int64(5))},
		{"5 = a", iceberg.EqualTo(ref("a"), int64(5))},
		{"5 <> a", iceberg.NotEqualTo(ref("a"), int64(5))},
		{"'x' = s", iceberg.EqualTo(ref("s"), "x")},
		{"1.5 > a.b", iceberg.LessThan(ref("a.b"), 1.5)},
		{"true = b", iceberg.EqualTo(ref("b"), true)},
		{"DATE '2024-01-01' <= d", lit(iceberg.OpGTEQ, "d", tl("2024-01-01"))},
		{"'2024-01-01' > d", lit(iceberg.OpLT, "d", tl("2024-01-01"))},

		// IS [NOT] NULL
		{"a IS NULL", iceberg.IsNull(ref("a"))},
		{"a is not null", iceberg.NotNull(ref("a"))},
		{"a Is NoT nUlL", iceberg.NotNull(ref("a"))},

		// [NOT] IN
		{"a IN (1, 2, 3)", iceberg.IsIn(ref("a"), int64(1), int64(2), int64(3))},
		{"a in ('x','y')", iceberg.IsIn(ref("a"), "x", "y")},
		{"a NOT IN (1, 2)", iceberg.NotIn(ref("a"), int64(1), int64(2))},
		{"a IN (1)", iceberg.EqualTo(ref("a"), int64(1))},
		{"a NOT IN (1)", iceberg.NotEqualTo(ref("a"), int64(1))},
		{"a IN (-1, 2.5)", iceberg.SetPredicate(iceberg.OpIn, ref("a"),
			[]iceberg.Literal{iceberg.NewLiteral(int64(-1)), iceberg.NewLiteral(2.5)})},
		{"d IN ('2024-01-01', '2024-01-02')", iceberg.SetPredicate(iceberg.OpIn, ref("d"),
			[]iceberg.Literal{tl("2024-01-01"), tl("2024-01-02")})},

		// [NOT] BETWEEN, whose AND is not the boolean AND
		{"a BETWEEN 1 AND 10", iceberg.NewAnd(
			iceberg.GreaterThanEqual(ref("a"), int64(1)), iceberg.LessThanEqual(ref("a"), int64(10)))},
		{"a NOT BETWEEN 1 AND 10", iceberg.NewOr(
			iceberg.LessThan(ref("a"), int64(1)), iceberg.GreaterThan(ref("a"), int64(10)))},
		{"a BETWEEN 1 AND 10 AND b = 2", iceberg.NewAnd(iceberg.NewAnd(
			iceberg.GreaterThanEqual(ref("a"), int64(1)), iceberg.LessThanEqual(ref("a"), int64(10))), b2)},
		{"b = 2 OR a between 'a' and 'm'", iceberg.NewOr(b2, iceberg.NewAnd(
			iceberg.GreaterThanEqual(ref("a"), "a"), iceberg.LessThanEqual(ref("a"), "m")))},

		// [NOT] LIKE 'prefix%'
		{"s LIKE 'abc%'", iceberg.StartsWith(ref("s"), "abc")},
		{"s not like 'abc%'", iceberg.NotStartsWith(ref("s"), "abc")},
		{`s LIKE 'a\%b\_c\\%'`, iceberg.StartsWith(ref("s"), `a%b_c\`)},
		{"s LIKE 'it''s%'", iceberg.StartsWith(ref("s"), "it's")},
		{"s LIKE '%'", iceberg.NotNull(ref("s"))},
		{"s NOT LIKE '%'", iceberg.AlwaysFalse{}},

		// TRUE / FALSE
		{"TRUE", iceberg.AlwaysTrue{}},
		{"false", iceberg.AlwaysFalse{}},
		{"NOT TRUE", iceberg.AlwaysFalse{}},
		{"(TRUE)", iceberg.AlwaysTrue{}},
		{"TRUE AND a = 1", a1},
		{"FALSE OR a = 1", a1},
		{"FALSE AND a = 1", iceberg.AlwaysFalse{}},

		// column names
		{"a.b = 1", iceberg.EqualTo(ref("a.b"), int64(1))},
		{"a.b.c = 1", iceberg.EqualTo(ref("a.b.c"), int64(1))},
		{"a . b = 1", iceberg.EqualTo(ref("a.b"), int64(1))},
		{"`my col` = 1", iceberg.EqualTo(ref("my col"), int64(1))},
		{`"my col" = 1`, iceberg.EqualTo(ref("my col"), int64(1))},
		{"`a`.`b c`.d = 1", iceberg.EqualTo(ref("a.b c.d"), int64(1))},
		{"`we``ird` = 1", iceberg.EqualTo(ref("we`ird"), int64(1))},
		{`"we""ird" = 1`, iceberg.EqualTo(ref(`we"ird`), int64(1))},
		{"`and` = 1", iceberg.EqualTo(ref("and"), int64(1))},
		{"a.in = 1", iceberg.EqualTo(ref("a.in"), int64(1))},
		{"_x1 = 1", iceberg.EqualTo(ref("_x1"), int64(1))},
		{"größe > 5", iceberg.GreaterThan(ref("größe"), int64(5))},
		{"date = '2024-01-01'", lit(iceberg.OpEQ, "date", tl("2024-01-01"))},
		{"timestamp IS NULL", iceberg.IsNull(ref("timestamp"))},
		{"Event_Date = 1", iceberg.EqualTo(ref("Event_Date"), int64(1))}, // case is kept

		// precedence: OR < AND < NOT < comparison
		{"a = 1 OR b = 2 AND c = 3", iceberg.NewOr(a1, iceberg.NewAnd(b2, c3))},
		{"a = 1 AND b = 2 OR c = 3", iceberg.NewOr(iceberg.NewAnd(a1, b2), c3)},
		{"(a = 1 OR b = 2) AND c = 3", iceberg.NewAnd(iceberg.NewOr(a1, b2), c3)},
		{"a = 1 AND (b = 2 OR c = 3)", iceberg.NewAnd(a1, iceberg.NewOr(b2, c3))},
		{"a = 1 OR b = 2 OR c = 3", iceberg.NewOr(iceberg.NewOr(a1, b2), c3)},
		{"a = 1 AND b = 2 AND c = 3", iceberg.NewAnd(iceberg.NewAnd(a1, b2), c3)},
		{"NOT a = 1 AND b = 2", iceberg.NewAnd(iceberg.NewNot(a1), b2)},
		{"NOT a = 1 OR b = 2", iceberg.NewOr(iceberg.NewNot(a1), b2)},
		{"NOT (a = 1 AND b = 2)", iceberg.NewNot(iceberg.NewAnd(a1, b2))},
		{"a = 1 AND NOT b = 2", iceberg.NewAnd(a1, iceberg.NewNot(b2))},
		{"NOT NOT a = 1", a1},
		{"not a is null", iceberg.NewNot(iceberg.IsNull(ref("a")))},
		{"((a = 1))", a1},
		{"a = 1 and b = 2 Or c = 3", iceberg.NewOr(iceberg.NewAnd(a1, b2), c3)},
		{"a IN (1, 2) OR b IS NULL AND c LIKE 'x%'", iceberg.NewOr(
			iceberg.IsIn(ref("a"), int64(1), int64(2)),
			iceberg.NewAnd(iceberg.IsNull(ref("b")), iceberg.StartsWith(ref("c"), "x")))},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		sameExpr(t, tt.in, got, tt.want)
	}
}

// Only strings holding a date or date-time get the lenient literal; every
// other string is a plain iceberg.StringLiteral. (Equals tells the two
// literal types apart.)
func TestParseWhereStringLiteralKind(t *testing.T) {
	tests := []struct {
		val      string
		timeLike bool
	}{
		{"abc", false},
		{"2024", false},
		{"2024-1-1", false},
		{"2024-02-30", false},
		{"2024-01-01x", false},
		{"2024-01-01 ", false},
		{"2024-01-01T25:00", false},
		{"2024-01-01", true},
		{"2024-01-01T10:00", true},
		{"2024-01-01 10:00:00.123456", true},
		{"2024-01-01T10:00:00Z", true},
		{"2024-01-01 10:00:00+05:30", true},
		{"2024-01-01T10:00-0800", true},
	}
	for _, tt := range tests {
		in := "s = '" + tt.val + "'"
		e, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		asTime := lit(iceberg.OpEQ, "s", tl(tt.val))
		asString := iceberg.EqualTo(ref("s"), tt.val)
		var want, other iceberg.BooleanExpression = asString, asTime
		if tt.timeLike {
			want, other = asTime, asString
		}
		if !e.Equals(want) || e.Equals(other) {
			t.Errorf("Parse(%q): date-time literal = %v, want %v", in, e.Equals(asTime), tt.timeLike)
		}
	}
}

func TestParseWhereErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", `where: empty filter at position 1, got end of input`},
		{"   ", `where: empty filter at position 4, got end of input`},
		{"a =", `where: expected a value after "=" at position 4, got end of input`},
		{"event_date = ", `where: expected a value after "=" at position 14, got end of input`},
		{"a = 1 AND", `where: expected a condition at position 10, got end of input`},
		{"a = 1 OR OR b = 2", "where: expected a condition at position 10, got \"OR\" (quote a column named like a keyword: `OR`)"},
		{"NOT", `where: expected a condition at position 4, got end of input`},
		{"()", `where: expected a condition at position 2, got ")"`},
		{"a = 1 b = 2", `where: expected AND, OR or end of input at position 7, got "b"`},
		{"(a = 1", `where: expected ")" at position 7, got end of input (to close the "(" at position 1)`},
		{"a = 1)", `where: unbalanced ")" at position 6, got ")"`},
		{"a", `where: expected a comparison operator, IS, IN, BETWEEN or LIKE after column "a" at position 2, got end of input`},
		{"a.b 1", `where: expected a comparison operator, IS, IN, BETWEEN or LIKE after column "a.b" at position 5, got "1"`},
		{"a. = 1", `where: expected a field name after "." at position 4, got "="`},
		{"a = b", `where: expected a value after "=" at position 5, got "b" (comparing two columns is not supported)`},
		{`a = "x"`, `where: expected a value after "=" at position 5, got "x" (double quotes name a column; write string values in single quotes)`},
		{"a = NULL", `where: expected a value after "=" at position 5, got "NULL" (NULL never compares equal; use IS NULL or IS NOT NULL)`},
		{"a = AND", `where: expected a value after "=" at position 5, got "AND"`},
		{"a IS 1", `where: expected NULL or NOT NULL after "IS" at position 6, got "1"`},
		{"a IS NOT", `where: expected NULL or NOT NULL after "IS" at position 9, got end of input`},
		{"a NOT 1", `where: expected IN, BETWEEN or LIKE after "NOT" at position 7, got "1"`},
		{"a IN 1", `where: expected "(" after "IN" at position 6, got "1"`},
		{"a IN ()", `where: empty IN list at position 7, got ")"`},
		{"a NOT IN ( )", `where: empty IN list at position 12, got ")"`},
		{"a IN (1,)", `where: expected a value after "," at position 9, got ")"`},
		{"a IN (1 2)", `where: expected "," or ")" in the IN list at position 9, got "2"`},
		{"a IN (1", `where: expected "," or ")" in the IN list at position 8, got end of input`},
		{"a IN (NULL)", `where: expected a value after "(" at position 7, got "NULL" (NULL never compares equal; use IS NULL or IS NOT NULL)`},
		{"a BETWEEN 1 OR 2", `where: expected AND between the bounds of "BETWEEN" at position 13, got "OR"`},
		{"a BETWEEN 1 AND", `where: expected a value after "AND" at position 16, got end of input`},
		{"a not between and 2", `where: expected a value after "between" at position 15, got "and"`},
		{"s LIKE 'a%b'", `where: unsupported LIKE pattern at position 8, got 'a%b' (only a single trailing % wildcard is supported)`},
		{"s LIKE '%abc'", `where: unsupported LIKE pattern at position 8, got '%abc' (only a single trailing % wildcard is supported)`},
		{"s LIKE 'ab%%'", `where: unsupported LIKE pattern at position 8, got 'ab%%' (only a single trailing % wildcard is supported)`},
		{"s LIKE 'a_b%'", `where: unsupported LIKE pattern at position 8, got 'a_b%' (the _ wildcard is not supported; write \_ for a literal _)`},
		{"s LIKE 'abc'", `where: unsupported LIKE pattern at position 8, got 'abc' (a pattern must end in %; use = for an exact match)`},
		{`s LIKE 'a\x%'`, `where: invalid escape in LIKE pattern at position 8, got 'a\x%' (only \%, \_ and \\ are escapes)`},
		{"s LIKE 5", `where: expected a quoted pattern after "LIKE" at position 8, got "5"`},
		{"s = 'abc", `where: unterminated string at position 5, got 'abc (close it with ')`},
		{"s = 'it''s", `where: unterminated string at position 5, got 'it''s (close it with ')`},
		{"`abc = 1", "where: unterminated quoted identifier at position 1, got `abc = 1 (close it with `)"},
		{"`` = 1", "where: empty quoted identifier at position 1, got ``"},
		{"a = 99999999999999999999", `where: integer out of the 64-bit range at position 5, got "99999999999999999999"`},
		{"a = 1e999", `where: number out of the double range at position 5, got "1e999"`},
		{"a = 5L", `where: malformed number at position 5, got "5L"`},
		{"a = 1e", `where: malformed number at position 5, got "1e"`},
		{"a = 1.2.3", `where: malformed number at position 5, got "1.2.3"`},
		{"a # 1", `where: unexpected character at position 3, got "#"`},
		{"a ! 1", `where: unexpected character, "!" must be followed by "=" at position 3, got "!"`},
		{"a = - 1", `where: expected a value after "=" at position 5, got "-"`},
		{"5 = 6", `where: expected a column name after "=" at position 5, got "6" (a condition must compare a column with a value)`},
		{"5 IS NULL", `where: expected a comparison operator after the value at position 3, got "IS"`},
		{"5", `where: expected a comparison operator after the value at position 2, got end of input`},
		{"AND a = 1", "where: expected a condition at position 1, got \"AND\" (quote a column named like a keyword: `AND`)"},
		{"NULL = a", "where: expected a condition at position 1, got \"NULL\" (quote a column named like a keyword: `NULL`)"},
		{"d = DATE '2024-13-01'", `where: invalid DATE literal at position 10, got '2024-13-01' (expected 'yyyy-mm-dd')`},
		{"ts > TIMESTAMP 'yesterday'", `where: invalid TIMESTAMP literal at position 16, got 'yesterday' (expected 'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][Z|+hh:mm]')`},
		// positions count characters, not bytes
		{"größe = ", `where: expected a value after "=" at position 9, got end of input`},
		{"s = 'ü' x", `where: expected AND, OR or end of input at position 9, got "x"`},
		// long tokens are shortened
		{"a = 1 " + strings.Repeat("x", 50), `where: expected AND, OR or end of input at position 7, got "` + strings.Repeat("x", 40) + `..."`},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error %q", tt.in, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Parse(%q) error\n got: %s\nwant: %s", tt.in, err, tt.want)
		}
		var we *Error
		if !errors.As(err, &we) {
			t.Errorf("Parse(%q) error is %T, want *Error", tt.in, err)
		}
	}
}

func TestParseWhereErrorFields(t *testing.T) {
	_, err := Parse("a = 1 AND b IN ()")
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want *Error", err)
	}
	if we.Pos != 17 || we.Token != ")" || we.Msg != "empty IN list" {
		t.Errorf("got %+v", *we)
	}
}

func TestParseWhereNestingLimit(t *testing.T) {
	deep := func(n int) string {
		return strings.Repeat("(", n) + "a = 1" + strings.Repeat(")", n)
	}
	if e, err := Parse(deep(100)); err != nil || e.String() != "Equal(term=Reference(name='a'), literal=1)" {
		t.Errorf("100 parentheses: %v, %v", e, err)
	}
	_, err := Parse(deep(maxWhereDepth + 1))
	want := `where: filter nested more than 500 deep at position 501, got "("`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Parse(strings.Repeat("NOT ", maxWhereDepth+1) + "a = 1")
	if err == nil || !strings.Contains(err.Error(), "nested more than 500 deep") {
		t.Errorf("deep NOT: got %v", err)
	}
}

func whereSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "d", Type: iceberg.PrimitiveTypes.Date},
		iceberg.NestedField{ID: 4, Name: "ts", Type: iceberg.PrimitiveTypes.Timestamp},
		iceberg.NestedField{ID: 5, Name: "tstz", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 6, Name: "price", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: 7, Name: "info", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 8, Name: "region", Type: iceberg.PrimitiveTypes.String},
			{ID: 9, Name: "zip", Type: iceberg.PrimitiveTypes.Int32},
		}}},
		iceberg.NestedField{ID: 10, Name: "flag", Type: iceberg.PrimitiveTypes.Bool},
		iceberg.NestedField{ID: 11, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
		iceberg.NestedField{ID: 12, Name: "tsns", Type: iceberg.PrimitiveTypes.TimestampNs},
	)
}

func day(y int, m time.Month, d int) iceberg.Date {
	return iceberg.Date(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

func micros(s string) iceberg.Timestamp {
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return iceberg.Timestamp(tm.UnixMicro())
}

// TestParseWhereBind binds parsed filters to a real schema and compares them
// with expressions built from natively typed literals, bound the same way.
// It shows that date and timestamp strings become date and timestamp
// literals at bind time.
func TestParseWhereBind(t *testing.T) {
	sch := whereSchema()

	// One fully spelled out, so the comparison below is known to be
	// comparing bound predicates and not, say, two equal errors.
	e, err := Parse("d = '2024-01-01'")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := iceberg.BindExpr(sch, e, true)
	if err != nil {
		t.Fatal(err)
	}
	const wantBound = "BoundEqual(term=BoundReference(field=3: d: optional date, " +
		"accessor=Accessor(position=2, inner=<nil>)), literal=2024-01-01)"
	if bound.String() != wantBound {
		t.Errorf("bound:\n got: %s\nwant: %s", bound, wantBound)
	}
	blp, ok := bound.(iceberg.BoundLiteralPredicate)
	if !ok {
		t.Fatalf("bound is %T", bound)
	}
	if got, want := blp.Literal(), iceberg.NewLiteral(day(2024, 1, 1)); !got.Equals(want) {
		t.Errorf("bound literal %v (%T), want date %v", got, got, want)
	}

	tests := []struct {
		in          string
		want        iceberg.BooleanExpression // unbound, typed literals
		wantLiteral string                    // substring of the bound form
	}{
		{"d = '2024-01-01'", iceberg.EqualTo(ref("d"), day(2024, 1, 1)), "literal=2024-01-01)"},
		{"d BETWEEN '2024-01-01' AND '2024-01-31'", iceberg.NewAnd(
			iceberg.GreaterThanEqual(ref("d"), day(2024, 1, 1)),
			iceberg.LessThanEqual(ref("d"), day(2024, 1, 31))), "literal=2024-01-31)"},
		{"DATE '2024-01-01' <= d", iceberg.GreaterThanEqual(ref("d"), day(2024, 1, 1)), "BoundGreaterThanEqual("},
		{"ts >= '2024-01-01'", iceberg.GreaterThanEqual(ref("ts"), micros("2024-01-01T00:00:00Z")),
			"literal=2024-01-01 00:00:00.000000)"},
		{"ts < '2024-01-01 12:30:00'", iceberg.LessThan(ref("ts"), micros("2024-01-01T12:30:00Z")),
			"literal=2024-01-01 12:30:00.000000)"},
		{"ts < '2024-01-01 12:30'", iceberg.LessThan(ref("ts"), micros("2024-01-01T12:30:00Z")), ""},
		{"ts < '2024-01-01T12:30:00.123456'", iceberg.LessThan(ref("ts"), micros("2024-01-01T12:30:00.123456Z")),
			"literal=2024-01-01 12:30:00.123456)"},
		{"ts >= TIMESTAMP '2024-01-01 08:00:00'", iceberg.GreaterThanEqual(ref("ts"), micros("2024-01-01T08:00:00Z")), ""},
		{"'2024-06-01' > ts", iceberg.LessThan(ref("ts"), micros("2024-06-01T00:00:00Z")), "BoundLessThan("},
		{"tstz >= '2024-01-01T00:00:00+02:00'", iceberg.GreaterThanEqual(ref("tstz"), micros("2023-12-31T22:00:00Z")),
			"literal=2023-12-31 22:00:00.000000)"},
		{"tstz >= '2024-01-01 00:00:00Z'", iceberg.GreaterThanEqual(ref("tstz"), micros("2024-01-01T00:00:00Z")), ""},
		{"tstz >= '2024-01-01'", iceberg.GreaterThanEqual(ref("tstz"), micros("2024-01-01T00:00:00Z")), ""},
		{"tsns = '2024-01-01 00:00:00.000000001'", iceberg.EqualTo(ref("tsns"),
			iceberg.TimestampNano(time.Date(2024, 1, 1, 0, 0, 0, 1, time.UTC).UnixNano())), ""},
		{"ts IN ('2024-01-01', '2024-01-02 00:00')", iceberg.IsIn(ref("ts"),
			micros("2024-01-01T00:00:00Z"), micros("2024-01-02T00:00:00Z")), "BoundIn("},
		{"name = '2024-01-01'", iceberg.EqualTo(ref("name"), "2024-01-01"), "literal=2024-01-01)"},
		{"name IN ('2024-01-01', 'x')", iceberg.IsIn(ref("name"), "2024-01-01", "x"), ""},
		{"name LIKE 'abc%'", iceberg.StartsWith(ref("name"), "abc"), "BoundStartsWith("},
		{"name NOT LIKE 'abc%'", iceberg.NotStartsWith(ref("name"), "abc"), "BoundNotStartsWith("},
		{"name IS NOT NULL", iceberg.NotNull(ref("name")), "BoundNotNull("},
		{"id IS NULL", iceberg.AlwaysFalse{}, "AlwaysFalse()"}, // id is required
		{"id > 5", iceberg.GreaterThan(ref("id"), int64(5)), "literal=5)"},
		{"5 < id", iceberg.GreaterThan(ref("id"), int64(5)), "BoundGreaterThan("},
		{"id IN (1, 2, 3)", iceberg.IsIn(ref("id"), int64(1), int64(2), int64(3)), "BoundIn("},
		{"id NOT IN (1, 2)", iceberg.NotIn(ref("id"), int64(1), int64(2)), "BoundNotIn("},
		{"price > 1.5", iceberg.GreaterThan(ref("price"), 1.5), "literal=1.5)"},
		{"price > 1", iceberg.GreaterThan(ref("price"), 1.0), "literal=1)"},
		{"amount >= 10.25", iceberg.GreaterThanEqual(ref("amount"), "10.25"), "literal=10.25)"},
		{"info.region = 'EU'", iceberg.EqualTo(ref("info.region"), "EU"), "field=8: region: optional string"},
		{"info.zip < 10000", iceberg.LessThan(ref("info.zip"), int32(10000)), "field=9: zip: optional int"},
		{"flag = true", iceberg.EqualTo(ref("flag"), true), "literal=true)"},
		{"d >= '2024-01-01' AND (name = 'x' OR id IN (1, 2))", iceberg.NewAnd(
			iceberg.GreaterThanEqual(ref("d"), day(2024, 1, 1)),
			iceberg.NewOr(iceberg.EqualTo(ref("name"), "x"), iceberg.IsIn(ref("id"), int64(1), int64(2)))), "BoundIn("},
	}
	for _, tt := range tests {
		e, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		got, err := iceberg.BindExpr(sch, e, true)
		if err != nil {
			t.Errorf("BindExpr(%q): %v", tt.in, err)
			continue
		}
		want, err := iceberg.BindExpr(sch, tt.want, true)
		if err != nil {
			t.Fatalf("binding the expectation for %q: %v", tt.in, err)
		}
		if !got.Equals(want) || (!hasSet(want) && got.String() != want.String()) {
			t.Errorf("BindExpr(%q)\n got: %s\nwant: %s", tt.in, got, want)
		}
		if !strings.Contains(got.String(), tt.wantLiteral) {
			t.Errorf("BindExpr(%q) = %s, want it to contain %s", tt.in, got, tt.wantLiteral)
		}
	}
}

func TestParseWhereBindCaseInsensitive(t *testing.T) {
	e, err := Parse("ID = 1 AND Info.Region = 'EU'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iceberg.BindExpr(whereSchema(), e, true); err == nil {
		t.Error("case-sensitive bind of ID succeeded")
	}
	got, err := iceberg.BindExpr(whereSchema(), e, false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := iceberg.BindExpr(whereSchema(), iceberg.NewAnd(
		iceberg.EqualTo(ref("id"), int64(1)), iceberg.EqualTo(ref("info.region"), "EU")), true)
	if got.String() != want.String() {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestParseWhereBindErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr error
		want    string
	}{
		{"nope = 1", iceberg.ErrInvalidSchema, "could not bind reference 'nope'"},
		{"info.nope = 'x'", iceberg.ErrInvalidSchema, "could not bind reference 'info.nope'"},
		{"id = 1 OR nope IS NULL", iceberg.ErrInvalidSchema, "could not bind reference 'nope'"},
		{"id = 'abc'", iceberg.ErrBadCast, "abc"},
		{"id > 1.5", iceberg.ErrBadCast, "Float64Literal to long"},
		{"ts = 'yesterday'", iceberg.ErrBadCast, "yesterday"},
		{"ts >= '2024-01-01T00:00:00+02:00'", iceberg.ErrBadCast, "has a zone offset but the column is timestamp"},
		{"d = '2024-01-01 10:00'", iceberg.ErrBadCast, "2024-01-01 10:00"},
		{"name > 5", iceberg.ErrBadCast, "Int64Literal to string"},
		{"id LIKE 'a%'", iceberg.ErrType, "StartsWith"},
	}
	for _, tt := range tests {
		e, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		b, err := iceberg.BindExpr(whereSchema(), e, true)
		if err == nil {
			t.Errorf("BindExpr(%q) = %v, want an error", tt.in, b)
			continue
		}
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("BindExpr(%q) error %q, want %v containing %q", tt.in, err, tt.wantErr, tt.want)
		}
	}
}

// The date-time literal must be indistinguishable from a string literal
// outside of binding: same string and JSON forms.
func TestWhereTimeLiteralIsAString(t *testing.T) {
	e, err := Parse("d = '2024-01-01'")
	if err != nil {
		t.Fatal(err)
	}
	plain := iceberg.EqualTo(ref("d"), "2024-01-01")
	if e.String() != plain.String() {
		t.Errorf("String: %s, want %s", e, plain)
	}
	gotJSON, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(plain)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("JSON: %s, want %s", gotJSON, wantJSON)
	}
	l := tl("2024-01-01")
	if l.Type() != iceberg.PrimitiveTypes.String || !l.Equals(tl("2024-01-01")) || l.Equals(tl("2024-01-02")) {
		t.Errorf("literal %v: type %v", l, l.Type())
	}
	if s, err := l.To(iceberg.PrimitiveTypes.String); err != nil || s != iceberg.StringLiteral("2024-01-01") {
		t.Errorf("To(string) = %#v, %v; want a plain StringLiteral", s, err)
	}
}
