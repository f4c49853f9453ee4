package maintenance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/iceberg-maintainer/maintainer/internal/rowfilter"
	"github.com/iceberg-maintainer/maintainer/maintenance/compact"
)

// ErrBadScope marks a request whose where cannot scope it: the filter does
// not parse, or the request leaves out compaction, the one task it scopes.
var ErrBadScope = errors.New("bad scope")

// CheckScope reports whether where can scope a request for tasks (all when
// empty): it must parse, and the tasks must include compaction. Column names
// are checked when the run plans, against the table's schema.
func CheckScope(tasks []string, where string) error {
	if strings.TrimSpace(where) == "" {
		return nil
	}
	if _, err := rowfilter.Parse(where); err != nil {
		return scopeError{msg: strings.TrimPrefix(err.Error(), "where: "), err: err}
	}
	if len(tasks) > 0 && !slices.Contains(tasks, TaskCompact) {
		return fmt.Errorf("%w: it scopes compaction only, and the tasks asked for (%s) do not include %s",
			ErrBadScope, strings.Join(tasks, ", "), TaskCompact)
	}
	return nil
}

// scopeError is a where that does not parse: the parser's message (its
// position and problem), matching ErrBadScope and the parser's error.
type scopeError struct {
	msg string
	err error
}

func (e scopeError) Error() string   { return e.msg }
func (e scopeError) Unwrap() []error { return []error{e.err, ErrBadScope} }

// scopeCompaction returns cfg with the where a run uses: the config's and
// the request's together (both must hold, so a request can narrow what the
// config lets compaction touch but never widen it), relative dates resolved
// at now.
func scopeCompaction(cfg compact.Config, reqWhere string, now time.Time) (compact.Config, error) {
	where := strings.TrimSpace(cfg.Where)
	if w := strings.TrimSpace(reqWhere); w != "" {
		if where == "" {
			where = w
		} else {
			where = "(" + where + ") AND (" + w + ")"
		}
	}
	if where == "" {
		return cfg, nil
	}
	resolved, err := rowfilter.Resolve(where, now)
	if err != nil {
		return cfg, fmt.Errorf("compaction where %q: %w", where, err)
	}
	cfg.Where = resolved
	return cfg, nil
}

// scope sets the policy's compaction where for req, logging the filter the
// run uses when the request scoped it or a relative date was resolved.
func (r *Runner) scope(pol Policy, name string, req Request) (Policy, error) {
	written := pol.Compact.Where
	c, err := scopeCompaction(pol.Compact, req.Where, r.now())
	if err != nil {
		return pol, fmt.Errorf("scope table %s: %w", name, err)
	}
	if req.Where != "" || c.Where != written {
		r.log.Info("compaction scoped", "table", name, "where", c.Where, "config_where", written, "request_where", req.Where)
	}
	pol.Compact = c
	return pol, nil
}
