package waiting

import (
	"context"
	"slices"
	"testing"
)

type log []string

func (l *log) Begin(what string) func() {
	*l = append(*l, "begin "+what)
	return func() { *l = append(*l, "end "+what) }
}

func TestBeginReportsToTheRecorderOfTheContext(t *testing.T) {
	Begin(context.Background(), "nobody listens")() // no recorder: nothing happens
	var l log
	ctx := With(context.Background(), &l)
	end := Begin(ctx, "catalog: load table")
	end()
	if want := []string{"begin catalog: load table", "end catalog: load table"}; !slices.Equal(l, want) {
		t.Errorf("recorded %q; want %q", l, want)
	}
}
