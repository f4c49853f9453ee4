// Package commitconflict tells a commit the catalog refused because the
// table changed from every other failed commit. After such a refusal the
// commit certainly did not land: the files written for it may be deleted
// and the work planned again. Any other failure, an unanswered commit
// above all, may have landed and is never taken for one.
package commitconflict

import (
	"errors"
	"strings"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

// Is reports whether err is a conflict: a lost compare-and-swap
// (table.ErrCommitFailed) or a failed requirement, which the SQL and hadoop
// catalogs return as plain errors. A REST catalog's answer that the
// outcome is unknown (a 5xx) is never one, whatever its message says: a
// server whose retry of a commit that had landed failed its requirement
// reports "requirement failed" in a 500.
func Is(err error) bool {
	if err == nil || errors.Is(err, rest.ErrCommitStateUnknown) {
		return false
	}
	return errors.Is(err, table.ErrCommitFailed) ||
		strings.Contains(strings.ToLower(err.Error()), "requirement failed")
}
