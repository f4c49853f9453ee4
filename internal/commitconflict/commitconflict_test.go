package commitconflict

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go/table"
)

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("commit: %w", table.ErrCommitFailed), true},
		{errors.New("Requirement failed: branch main has changed"), true}, // the SQL catalog's plain error
		{context.DeadlineExceeded, false},                                 // no answer: may have landed
		{errors.New("connection reset by peer"), false},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
