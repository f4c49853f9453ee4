package lock

import (
	"strings"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		prefix, catalog, table, want string
		valid                        bool
	}{
		{"iceberg-maintainer", "default", "db.events", "iceberg-maintainer:lock:default:db.events", true},
		{"x", "prod", "a.b.c", "x:lock:prod:a.b.c", true},
		{"", "prod", "db.t", "lock:prod:db.t", true},
		{"x", "", "db.t", "x:lock:default:db.t", true},
		{"x", "prod", "", "x:lock:prod:", false},
		// No escaping: names with ':' may share a key, which only
		// serialises more.
		{"x", "a:b", "c", "x:lock:a:b:c", true},
		{"x", "a", "b:c", "x:lock:a:b:c", true},
	} {
		got := Key(tc.prefix, tc.catalog, tc.table)
		if got != tc.want {
			t.Errorf("Key(%q, %q, %q) = %q, want %q", tc.prefix, tc.catalog, tc.table, got, tc.want)
		}
		if err := ValidateKey(got); (err == nil) != tc.valid {
			t.Errorf("ValidateKey(%q) = %v, want valid=%v", got, err, tc.valid)
		}
	}
	if err := ValidateKey(" "); err == nil {
		t.Error("ValidateKey of a blank key succeeded")
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{TTL: time.Second}).Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	err := (Options{TTL: 0, Wait: -1, RetryDelay: -1}).Validate()
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"ttl", "wait", "retry delay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s (all problems at once)", err, want)
		}
	}
}

func TestRetryDelayDefault(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want time.Duration
	}{
		{Options{TTL: time.Second}, 100 * time.Millisecond},
		{Options{TTL: time.Hour}, time.Second}, // capped
		{Options{TTL: time.Microsecond}, time.Millisecond},
		{Options{TTL: time.Hour, RetryDelay: 7 * time.Millisecond}, 7 * time.Millisecond},
	} {
		if got := tc.o.retryDelay(); got != tc.want {
			t.Errorf("retryDelay(%+v) = %s, want %s", tc.o, got, tc.want)
		}
	}
}
