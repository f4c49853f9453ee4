package commitconflict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

// A refusal is a conflict however it is wrapped or spelt; a failure that
// may have landed (no answer, a reset connection) never is.
func TestIs(t *testing.T) {
	conflicts := []error{
		errors.Join(errors.New("commit table"), table.ErrCommitFailed),
		errors.New("Requirement failed: branch main has changed"), // the SQL catalog's plain error
	}
	others := []error{nil, errors.New("context deadline exceeded"), errors.New("connection reset by peer"),
		// A REST 5xx: the outcome is unknown, even when the server's
		// message names a failed requirement.
		fmt.Errorf("%w: CommitStateUnknownException: Requirement failed: branch main has changed", rest.ErrCommitStateUnknown),
	}
	for _, err := range conflicts {
		if !Is(err) {
			t.Errorf("Is(%v) = false; want a conflict", err)
		}
	}
	for _, err := range others {
		if Is(err) {
			t.Errorf("Is(%v) = true; it may have landed", err)
		}
	}
}
