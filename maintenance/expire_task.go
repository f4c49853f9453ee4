package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/maintenance/expire"
	"github.com/iceberg-maintainer/maintainer/maintenance/trigger"
)

// ExpireReport carries the figures of an expiration plan and run. Its lists
// are [] when empty, never null: consumers iterate them.
type ExpireReport struct {
	Policy          expire.Policy            `json:"policy"`
	SnapshotsBefore int                      `json:"snapshots_before"`
	Expired         []expire.ExpiredSnapshot `json:"expired"`
	RemovedRefs     []expire.RemovedRef      `json:"removed_refs"`
	FilesPlanned    int                      `json:"files_planned"`
	BytesPlanned    int64                    `json:"bytes_planned"`
	FilesBlocked    string                   `json:"files_blocked,omitempty"`
	// RemovedSchemas and RemovedSpecs are the schema and partition spec
	// ids the plan removes (clean_expired_metadata).
	RemovedSchemas []int `json:"removed_schemas,omitempty"`
	RemovedSpecs   []int `json:"removed_specs,omitempty"`
	// FilesToRetry counts the files earlier runs failed to delete, which
	// this run retries before planning.
	FilesToRetry int                 `json:"files_to_retry"`
	Retry        *expire.RetryResult `json:"retry,omitempty"`
	// RetryDropped counts the retried files that failed in
	// trigger.MaxRetryRuns runs and are no longer retried: they are left
	// for the orphan pass.
	RetryDropped     int `json:"retry_dropped"`
	SnapshotsExpired int `json:"snapshots_expired"`
	// FilesDeleted counts the retried files deleted too; BytesDeleted only
	// the planned ones (a retried file's size is not kept).
	FilesDeleted int            `json:"files_deleted"`
	BytesDeleted int64          `json:"bytes_deleted"`
	Result       *expire.Result `json:"result,omitempty"`
}

func (r *Runner) expire(ctx context.Context, tbl *table.Table, cfg expire.Config, req Request) Outcome {
	uuid := tbl.Metadata().TableUUID().String()
	toRetry := req.state.RetryPaths(uuid)
	rep := &ExpireReport{FilesToRetry: len(toRetry), Expired: []expire.ExpiredSnapshot{}, RemovedRefs: []expire.RemovedRef{}}
	var store objstore.Store
	deleter := func() (objstore.Store, error) {
		if store != nil {
			return store, nil
		}
		s, err := objstore.NewStore(ctx, tbl, r.s3, r.props)
		if err != nil {
			return nil, fmt.Errorf("open the store that deletes expired files: %w", err)
		}
		store = s
		return s, nil
	}

	// Files an earlier run failed to delete go first, whatever is planned
	// now: they are proven unreferenced (again, against this metadata) and
	// wait for nothing else. They stay in the state until deleted, found
	// referenced or failed in trigger.MaxRetryRuns runs, even when this run
	// fails. A retry that fails does not stop this run's expiry (one key
	// under an object lock would otherwise stop it for good), but fails it.
	var carried *trigger.Retry // the list after the retry, its runs counted
	if toRetry != nil {
		carried = req.state.Retry
	}
	var retryErr error
	keep := func(o Outcome, failed ...[]string) Outcome {
		if retryErr != nil {
			o.Status, o.failure = StatusFailed, errors.Join(o.failure, retryErr)
		}
		// A list of another table of the same name (dropped and re-created)
		// is cleared too: its paths are not this table's to delete.
		if req.state.Retry != nil || len(slices.Concat(failed...)) > 0 {
			var again []string
			if carried != nil {
				again = carried.Paths
			}
			next, _ := trigger.NextRetry(carried, uuid, again, nil, failed...)
			if next != nil && next.Dropped > 0 && o.Expire != nil {
				// Beyond MaxRetryPaths: not kept, so left for the orphan pass.
				o.Expire.RetryDropped += next.Dropped
				r.log.Warn(fmt.Sprintf("more failed deletes than the %d kept to retry; left for the orphan pass", trigger.MaxRetryPaths),
					"table", strings.Join(tbl.Identifier(), "."), "task", TaskExpire, "files", next.Dropped)
			}
			o.keep = func(st trigger.State) trigger.State { st.Retry = next; return st }
		}
		return o
	}
	if len(toRetry) > 0 && !req.DryRun {
		d, err := deleter()
		if err != nil {
			return keep(Outcome{Status: StatusFailed, failure: err, Expire: rep})
		}
		retry, err := expire.RetryDeletes(ctx, r.cat, tbl, toRetry, cfg, expire.RetryOptions{Logger: r.log, Deleter: d})
		rep.Retry = retry
		rep.FilesDeleted = retry.Deleted
		// A run counts against a path only when its delete was sent and
		// failed: not when the store was down for all of them, the run was
		// stopped, or its batch was never sent.
		counted := func(p string) bool { return retry.Attempted(p) && !retry.Unreachable() && ctx.Err() == nil }
		var dropped []string
		carried, dropped = trigger.NextRetry(req.state.Retry, uuid, retry.FailedPaths(), counted)
		if rep.RetryDropped = len(dropped); len(dropped) > 0 {
			r.log.Warn(fmt.Sprintf("files failed to delete in %d runs; left for the orphan pass", trigger.MaxRetryRuns),
				"table", strings.Join(tbl.Identifier(), "."), "task", TaskExpire, "files", dropped)
		}
		if err != nil {
			retryErr = fmt.Errorf("retry failed deletes: %w", err)
			if retry.Unreachable() || ctx.Err() != nil {
				// Expiring more now would only leave more files behind.
				return keep(Outcome{Status: StatusFailed, Reason: "no snapshot expired: " + retryReason(retry, rep.RetryDropped), Expire: rep})
			}
		}
	}

	plan, err := expire.PlanTable(ctx, tbl, cfg, r.now())
	if err != nil {
		o := Outcome{Status: StatusFailed, failure: fmt.Errorf("plan expiration: %w", err)}
		if rep.Retry != nil {
			o.Expire = rep // what the retry did; there is no plan to report
		}
		return keep(o)
	}
	rep.Policy, rep.SnapshotsBefore, rep.Expired, rep.RemovedRefs = plan.Policy, plan.SnapshotsBefore, nonNil(plan.Expired), nonNil(plan.RemovedRefs)
	rep.FilesPlanned, rep.BytesPlanned, rep.FilesBlocked = len(plan.Files), plan.FileBytes(), plan.FilesBlocked
	rep.RemovedSchemas, rep.RemovedSpecs = plan.RemovedSchemas, plan.RemovedSpecs
	summary := fmt.Sprintf("%d of %d snapshots (retain last %d, max age %s), %d refs, %d files (%s)",
		len(plan.Expired), plan.SnapshotsBefore, plan.Policy.RetainLast, plan.Policy.MaxSnapshotAge,
		len(plan.RemovedRefs), len(plan.Files), HumanBytes(plan.FileBytes()))
	if req.DryRun {
		reason := expire.ReasonNothingToExpire
		if !plan.Empty() {
			reason = "would expire " + summary
		}
		if len(toRetry) > 0 {
			reason += fmt.Sprintf("; would first retry %d failed deletes", len(toRetry))
		}
		return Outcome{Status: StatusPlanned, Reason: reason, Expire: rep}
	}
	retried := ""
	if rep.Retry != nil {
		retried = "; " + retryReason(rep.Retry, rep.RetryDropped)
	}
	if plan.Empty() {
		if rep.Retry != nil { // the retry was this run's work
			return keep(Outcome{Status: StatusSucceeded, Reason: expire.ReasonNothingToExpire + retried, Expire: rep})
		}
		return keep(Outcome{Status: StatusNotDue, Reason: expire.ReasonNothingToExpire, Expire: rep})
	}
	opts := expire.Options{Logger: r.log, Head: r.metaLoc}
	if len(plan.Files) > 0 {
		if opts.Deleter, err = deleter(); err != nil {
			return keep(Outcome{Status: StatusFailed, failure: err, Expire: rep})
		}
	}
	res, err := expire.Execute(ctx, r.cat, tbl, plan, cfg, opts) // res is never nil
	rep.Result = res
	rep.SnapshotsExpired, rep.BytesDeleted = res.SnapshotsExpired(), res.BytesDeleted()
	rep.FilesDeleted += res.FilesDeleted()
	failed := res.FailedPaths()
	reason := fmt.Sprintf("expired %d snapshots, deleted %d files (%s)", rep.SnapshotsExpired, res.FilesDeleted(), HumanBytes(rep.BytesDeleted))
	if len(failed) > 0 {
		reason += fmt.Sprintf("; %d deletes failed (first: %s), kept to retry", len(failed), strings.Join(failed[:min(3, len(failed))], ", "))
	}
	if res.FilesBlocked != "" {
		reason += "; no file deleted: " + res.FilesBlocked
	}
	reason += retried
	if err != nil {
		if !errors.Is(err, expire.ErrDeleteFailed) {
			reason = ""
		}
		return keep(Outcome{Status: StatusFailed, Reason: reason, failure: fmt.Errorf("expire snapshots: %w", err), Expire: rep}, failed)
	}
	return keep(Outcome{Status: StatusSucceeded, Reason: reason, Expire: rep}, failed)
}

// retryReason says what a retry of failed deletes did, naming the first
// files that failed again.
func retryReason(r *expire.RetryResult, dropped int) string {
	s := fmt.Sprintf("retried %d failed deletes: %d deleted, %d referenced again (kept), %d failed again",
		r.Files, r.Deleted, r.Referenced, r.Failed)
	if failed := r.FailedPaths(); len(failed) > 0 {
		s += fmt.Sprintf(" (first: %s)", strings.Join(failed[:min(3, len(failed))], ", "))
	}
	if dropped > 0 {
		s += fmt.Sprintf(", %d of them left for the orphan pass after %d runs", dropped, trigger.MaxRetryRuns)
	}
	return s
}
