package rowfilter

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
)

// relSpan is one relative date as written (src[start:end]) and the
// literal it resolved to, in the filter syntax.
type relSpan struct {
	start, end int
	literal    string
}

// Resolve returns s with every relative date (CURRENT_DATE - 1) replaced by
// the literal it means at now, in UTC (DATE '2024-05-31'), and the rest
// as written; a filter without relative dates comes back unchanged. It is
// what a run logs and shows: the filter that chose its files. Errors are
// Parse's.
func Resolve(s string, now time.Time) (string, error) {
	_, spans, err := parse(s, now)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(sp.literal)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

func isRelative(t token) bool {
	return isKeyword(t, "CURRENT_DATE") || isKeyword(t, "CURRENT_TIMESTAMP")
}

// tokenEnd is the byte offset just past t in the source.
func tokenEnd(t token) int { return t.pos + len(t.text) }

// Date formats of resolved relative dates: what DATE and TIMESTAMP
// literals accept back.
const (
	relDateLayout = time.DateOnly
	relTimeLayout = "2006-01-02 15:04:05.999999"
)

// parseRelative parses CURRENT_DATE or CURRENT_TIMESTAMP (kw, consumed)
// with its arithmetic and resolves it at p.now.
func (p *whereParser) parseRelative(kw token) (iceberg.Literal, error) {
	isDate := strings.EqualFold(kw.text, "CURRENT_DATE")
	end := tokenEnd(kw)
	loc := time.UTC
	if p.peek().kind == tkLParen {
		var err error
		if loc, end, err = p.relativeZone(kw, isDate); err != nil {
			return nil, err
		}
	}
	at := p.now.Truncate(time.Microsecond)
	if isDate {
		lt := at.In(loc)
		at = time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, time.UTC)
	}
	for {
		sign, amount, ok, err := p.relativeTerm(kw, isDate)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		at = amount.apply(at, sign)
		end = tokenEnd(p.toks[p.i-1])
	}
	if at.Year() < 1 || at.Year() > 9999 {
		return nil, p.errAt(kw, "relative date out of range", "it must fall within the years 1 to 9999")
	}
	var lit, text string
	if isDate {
		lit = at.Format(relDateLayout)
		text = "DATE '" + lit + "'"
	} else {
		lit = at.Format(relTimeLayout)
		text = "TIMESTAMP '" + lit + "'"
	}
	p.rel = append(p.rel, relSpan{start: kw.pos, end: end, literal: text})
	return whereTimeLiteral{iceberg.StringLiteral(lit)}, nil
}

// relativeZone reads the parentheses after CURRENT_DATE or
// CURRENT_TIMESTAMP (kw): empty, or for CURRENT_DATE the time zone whose
// today it means ('Europe/Berlin'). It returns the zone and the offset past
// the closing parenthesis.
func (p *whereParser) relativeZone(kw token, isDate bool) (*time.Location, int, error) {
	open := p.next()
	loc := time.UTC
	if z := p.peek(); z.kind == tkString {
		p.next()
		if !isDate {
			return nil, 0, p.errAt(z, "CURRENT_TIMESTAMP takes no time zone", "it is the same instant in every zone")
		}
		var err error
		switch {
		case z.val == "Local":
			err = fmt.Errorf("it depends on the host")
		case strings.EqualFold(z.val, "UTC"):
			loc = time.UTC
		default:
			loc, err = time.LoadLocation(z.val)
		}
		if err != nil {
			return nil, 0, p.errAt(z, "unknown time zone", "an IANA name such as 'Europe/Berlin', or 'UTC'")
		}
	}
	c := p.next()
	if c.kind != tkRParen {
		return nil, 0, p.errAt(c, fmt.Sprintf(`expected ")" after %q`, kw.text+open.text),
			"CURRENT_DATE takes nothing or a time zone: CURRENT_DATE('Europe/Berlin')")
	}
	return loc, tokenEnd(c), nil
}

// interval is an amount of one unit.
type interval struct {
	n    int
	unit string // upper case, singular: DAY, HOUR
}

func (iv interval) apply(t time.Time, sign int) time.Time {
	n := sign * iv.n
	switch iv.unit {
	case "SECOND":
		return t.Add(time.Duration(n) * time.Second)
	case "MINUTE":
		return t.Add(time.Duration(n) * time.Minute)
	case "HOUR":
		return t.Add(time.Duration(n) * time.Hour)
	case "DAY":
		return t.AddDate(0, 0, n)
	case "WEEK":
		return t.AddDate(0, 0, 7*n)
	case "MONTH":
		return t.AddDate(0, n, 0)
	}
	return t.AddDate(n, 0, 0) // YEAR
}

var intervalUnits = map[string]bool{"SECOND": true, "MINUTE": true, "HOUR": true, "DAY": true, "WEEK": true, "MONTH": true, "YEAR": true}

// maxRelativeAmount bounds one term, so the arithmetic cannot overflow.
const maxRelativeAmount = 1_000_000

// relativeTerm reads one "+ amount" or "- amount" after a relative date;
// ok is false when the next token starts none.
func (p *whereParser) relativeTerm(kw token, isDate bool) (sign int, iv interval, ok bool, err error) {
	t := p.peek()
	var num token
	switch {
	case t.kind == tkSign:
		p.next()
		sign = 1
		if t.text == "-" {
			sign = -1
		}
		switch n := p.peek(); {
		case n.kind == tkNumber && isDigit(n.text[0]):
			num = p.next()
		case isKeyword(n, "INTERVAL"):
			p.next()
			iv, err = p.parseInterval(n)
			if err != nil {
				return 0, interval{}, false, err
			}
			return sign, iv, true, p.checkUnit(kw, n, iv, isDate)
		default:
			return 0, interval{}, false, p.errAt(n, fmt.Sprintf("expected a number of days or INTERVAL after %q", t.text), "")
		}
	case t.kind == tkNumber && (t.text[0] == '-' || t.text[0] == '+'):
		// current_date-1 lexes as a signed number.
		num = p.next()
		sign = 1
		if num.text[0] == '-' {
			sign = -1
		}
		num.text, num.pos = num.text[1:], num.pos+1
	default:
		return 0, interval{}, false, nil
	}
	n, err := p.amount(num)
	if err != nil {
		return 0, interval{}, false, err
	}
	if !isDate {
		return 0, interval{}, false, p.errAt(num, fmt.Sprintf("a bare number after %s is ambiguous", strings.ToUpper(kw.text)),
			"write INTERVAL "+num.text+" DAY, or HOUR")
	}
	return sign, interval{n: n, unit: "DAY"}, true, nil
}

// amount reads a non-negative integer count.
func (p *whereParser) amount(t token) (int, error) {
	n, err := strconv.Atoi(t.text)
	if err != nil || n < 0 || n > maxRelativeAmount {
		return 0, p.errAt(t, fmt.Sprintf("expected a whole number from 0 to %d", maxRelativeAmount), "")
	}
	return n, nil
}

// parseInterval reads what follows INTERVAL (kw, consumed): N unit,
// 'N' unit or 'N unit'.
func (p *whereParser) parseInterval(kw token) (interval, error) {
	t := p.next()
	var countTok token
	var unitText string
	unitTok := t
	switch t.kind {
	case tkNumber:
		countTok = t
	case tkString:
		count, unit, _ := strings.Cut(strings.TrimSpace(t.val), " ")
		countTok = token{kind: tkNumber, text: count, pos: t.pos}
		unitText = strings.TrimSpace(unit)
	default:
		return interval{}, p.errAt(t, fmt.Sprintf("expected a number after %q", kw.text), "e.g. INTERVAL 1 DAY")
	}
	n, err := p.amount(countTok)
	if err != nil {
		return interval{}, err
	}
	if unitText == "" {
		unitTok = p.next()
		if unitTok.kind != tkIdent {
			return interval{}, p.errAt(unitTok, "expected a unit after the interval's number",
				"SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR")
		}
		unitText = unitTok.text
	}
	unit := strings.TrimSuffix(strings.ToUpper(unitText), "S")
	if !intervalUnits[unit] {
		return interval{}, p.errAt(unitTok, "unknown interval unit", "SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR")
	}
	return interval{n: n, unit: unit}, nil
}

// checkUnit refuses a unit smaller than a day on CURRENT_DATE, which
// would no longer be a date.
func (p *whereParser) checkUnit(kw, at token, iv interval, isDate bool) error {
	switch iv.unit {
	case "SECOND", "MINUTE", "HOUR":
		if isDate {
			return p.errAt(at, fmt.Sprintf("%s moves by days, weeks, months or years, not %ss",
				strings.ToUpper(kw.text), strings.ToLower(iv.unit)), "use CURRENT_TIMESTAMP for hours")
		}
	}
	return nil
}
