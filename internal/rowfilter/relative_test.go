package rowfilter

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, wherever they run

	"github.com/apache/iceberg-go"
)

// relNow is 2024-03-01 00:30 UTC: yesterday is in the previous month (and
// a leap day), and it is still Feb 29 in New York, which must not matter.
var relNow = time.Date(2024, 3, 1, 0, 30, 15, 123456789, time.UTC)

func TestResolveRelativeDates(t *testing.T) {
	tests := []struct{ in, want string }{
		{"dt = current_date - 1", "dt = DATE '2024-02-29'"},
		{"dt = CURRENT_DATE() - 1", "dt = DATE '2024-02-29'"},
		{"dt = current_date-1", "dt = DATE '2024-02-29'"},
		{"dt = current_date", "dt = DATE '2024-03-01'"},
		{"dt = current_date + 1", "dt = DATE '2024-03-02'"},
		{"dt >= current_date - interval 1 day AND dt < current_date", "dt >= DATE '2024-02-29' AND dt < DATE '2024-03-01'"},
		{"dt = current_date - INTERVAL '7' DAYS", "dt = DATE '2024-02-23'"},
		{"dt = current_date - interval '1 week'", "dt = DATE '2024-02-23'"},
		{"dt = current_date - interval 1 month", "dt = DATE '2024-02-01'"},
		{"dt = current_date - interval 1 year - 1", "dt = DATE '2023-02-28'"},
		{"dt BETWEEN current_date - 7 AND current_date - 1", "dt BETWEEN DATE '2024-02-23' AND DATE '2024-02-29'"},
		{"dt IN (current_date - 1, current_date - 2)", "dt IN (DATE '2024-02-29', DATE '2024-02-28')"},
		{"current_date - 1 = dt", "DATE '2024-02-29' = dt"},
		{"ts >= current_timestamp - interval 6 hours", "ts >= TIMESTAMP '2024-02-29 18:30:15.123456'"},
		{"ts < current_timestamp", "ts < TIMESTAMP '2024-03-01 00:30:15.123456'"},
		{"ts >= current_timestamp - interval 90 minutes", "ts >= TIMESTAMP '2024-02-29 23:00:15.123456'"},
		// Still Feb 29 in New York; already Mar 1 in Tokyo.
		{"dt = current_date('America/New_York')", "dt = DATE '2024-02-29'"},
		{"dt = current_date('America/New_York') - 1", "dt = DATE '2024-02-28'"},
		{"dt = CURRENT_DATE('Asia/Tokyo')", "dt = DATE '2024-03-01'"},
		{"dt = current_date('UTC') - 1", "dt = DATE '2024-02-29'"},
		{"dt = current_date('utc') - 1", "dt = DATE '2024-02-29'"},
		// No relative date: unchanged, spacing and case included.
		{"a  =  1 and b = 'current_date - 1'", "a  =  1 and b = 'current_date - 1'"},
		{"`current_date` = 1", "`current_date` = 1"},
	}
	for _, tc := range tests {
		got, err := Resolve(tc.in, relNow)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Resolve(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		// The resolved filter parses to the same expression.
		a, _, err := parse(tc.in, relNow)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(got)
		if err != nil {
			t.Errorf("Parse(resolved %q): %v", got, err)
			continue
		}
		if !a.Equals(b) {
			t.Errorf("%q parses to %s, its resolved form %q to %s", tc.in, a, got, b)
		}
	}
}

// The zone of now does not matter: relative dates are UTC dates.
func TestResolveIsUTC(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve("dt = current_date - 1", relNow.In(ny))
	if err != nil || got != "dt = DATE '2024-02-29'" {
		t.Errorf("Resolve at %s = %q, %v; want yesterday in UTC", relNow.In(ny), got, err)
	}
}

// A resolved relative date binds and filters like the literal it stands
// for, against date and timestamp columns.
func TestRelativeDatesBind(t *testing.T) {
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "dt", Type: iceberg.PrimitiveTypes.Date, Required: true},
		iceberg.NestedField{ID: 2, Name: "ts", Type: iceberg.PrimitiveTypes.Timestamp, Required: true},
		iceberg.NestedField{ID: 3, Name: "tstz", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
	)
	for _, tc := range []struct{ rel, abs string }{
		{"dt = current_date - 1", "dt = DATE '2024-02-29'"},
		{"ts >= current_date - 1", "ts >= TIMESTAMP '2024-02-29 00:00:00'"},
		{"tstz >= current_timestamp - interval 1 hour", "tstz >= TIMESTAMP '2024-02-29 23:30:15.123456'"},
	} {
		rel, _, err := parse(tc.rel, relNow)
		if err != nil {
			t.Fatal(err)
		}
		abs, err := Parse(tc.abs)
		if err != nil {
			t.Fatal(err)
		}
		br, err := iceberg.BindExpr(schema, rel, true)
		if err != nil {
			t.Fatalf("bind %q: %v", tc.rel, err)
		}
		ba, err := iceberg.BindExpr(schema, abs, true)
		if err != nil {
			t.Fatalf("bind %q: %v", tc.abs, err)
		}
		if br.String() != ba.String() {
			t.Errorf("%q binds to %s; %q to %s", tc.rel, br, tc.abs, ba)
		}
	}
}

func TestRelativeDateErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"dt = current_date -", `where: expected a number of days or INTERVAL after "-" at position 20, got end of input`},
		{"dt = current_date - x", `where: expected a number of days or INTERVAL after "-" at position 21, got "x"`},
		{"dt = current_date - 1.5", `where: expected a whole number from 0 to 1000000 at position 21, got "1.5"`},
		{"dt = current_date - interval 1 fortnight", `where: unknown interval unit at position 32, got "fortnight" (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)`},
		{"dt = current_date - interval 1", `where: expected a unit after the interval's number at position 31, got end of input (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)`},
		{"dt = current_date - interval day", `where: expected a number after "interval" at position 30, got "day" (e.g. INTERVAL 1 DAY)`},
		{"dt = current_date - interval 2 hours", `where: CURRENT_DATE moves by days, weeks, months or years, not hours at position 21, got "interval" (use CURRENT_TIMESTAMP for hours)`},
		{"ts = current_timestamp - 1", `where: a bare number after CURRENT_TIMESTAMP is ambiguous at position 26, got "1" (write INTERVAL 1 DAY, or HOUR)`},
		{"dt = current_date - 99999999", `where: expected a whole number from 0 to 1000000 at position 21, got "99999999"`},
		{"dt = current_date - interval 1000000 years", `where: relative date out of range at position 6, got "current_date" (it must fall within the years 1 to 9999)`},
		{"current_date = 1", `where: expected a column name after "=" at position 16, got "1" (a condition must compare a column with a value)`},
		{"dt = 1 +", `where: expected AND, OR or end of input at position 8, got "+"`},
		{"dt = current_date('Mars/Olympus')", `where: unknown time zone at position 19, got 'Mars/Olympus' (an IANA name such as 'Europe/Berlin', or 'UTC')`},
		{"dt = current_date('Local')", `where: unknown time zone at position 19, got 'Local' (an IANA name such as 'Europe/Berlin', or 'UTC')`},
		{"ts = current_timestamp('UTC')", `where: CURRENT_TIMESTAMP takes no time zone at position 24, got 'UTC' (it is the same instant in every zone)`},
		{"dt = current_date(1)", `where: expected ")" after "current_date(" at position 19, got "1" (CURRENT_DATE takes nothing or a time zone: CURRENT_DATE('Europe/Berlin'))`},
	}
	for _, tc := range tests {
		_, err := Resolve(tc.in, relNow)
		var we *Error
		if !errors.As(err, &we) || err.Error() != tc.want {
			t.Errorf("Resolve(%q) error\n got: %v\nwant: %s", tc.in, err, tc.want)
		}
	}
}
