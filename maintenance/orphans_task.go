package maintenance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/objstore"
	"github.com/iceberg-maintainer/maintainer/maintenance/orphans"
)

// OrphansReport carries the figures of an orphan scan and removal. Its
// candidates are [] when empty, never null: consumers iterate them.
type OrphansReport struct {
	Location      string              `json:"location"`
	Cutoff        time.Time           `json:"cutoff"` // files modified before it may be deleted
	ListedFiles   int                 `json:"listed_files"`
	Candidates    []orphans.Candidate `json:"candidates"`
	Skipped       []orphans.Skipped   `json:"skipped,omitempty"`
	FilesFound    int                 `json:"files_found"`
	BytesFound    int64               `json:"bytes_found"`
	FilesDeleted  int                 `json:"files_deleted"`
	BytesDeleted  int64               `json:"bytes_deleted"`
	NowReferenced []string            `json:"now_referenced,omitempty"`
	// DeletedReferenced are deleted files a writer committed while they
	// were deleted: the run failed, the table has lost them.
	DeletedReferenced []string `json:"deleted_referenced,omitempty"`
	Failed            []string `json:"failed,omitempty"`
	// UnloadableTables are other tables of the catalog that could not be
	// loaded, ruled out by their metadata location: the removal went on.
	UnloadableTables []orphans.Unloadable `json:"unloadable_tables,omitempty"`
}

func (r *Runner) orphans(ctx context.Context, tbl *table.Table, cfg orphans.Config, req Request) Outcome {
	store, err := objstore.NewStore(ctx, tbl, r.s3, r.props)
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("open storage of %s: %w", tbl.Location(), err)}
	}
	// Another table living under this one's location would lose its files.
	nb, err := r.neighbours.Neighbours(ctx, tbl.Identifier())
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("list the catalog's table locations: %w", err)}
	}
	if err := orphans.CheckUnloadable(tbl, cfg, nb.Unloadable); err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan orphan removal: %w", err)}
	}
	for _, u := range nb.Unloadable {
		r.log.Warn("orphans: another table does not load; its metadata is outside this table's location, so removal goes on",
			"table", strings.Join(tbl.Identifier(), "."), "other_table", u.Table, "metadata", u.MetadataLocation, "err", u.Error)
	}
	plan, err := orphans.PlanTable(ctx, tbl, store, cfg, r.now(), nb.Locations)
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan orphan removal: %w", err)}
	}
	rep := &OrphansReport{
		Location: plan.Location, Cutoff: plan.Cutoff.UTC(),
		ListedFiles: plan.ListedFiles, Candidates: nonNil(plan.Candidates), Skipped: plan.Skipped,
		FilesFound: len(plan.Candidates), BytesFound: plan.CandidateBytes(),
		UnloadableTables: nb.Unloadable,
	}
	summary := fmt.Sprintf("%d orphan files (%s) older than %s among %d listed", rep.FilesFound,
		HumanBytes(rep.BytesFound), cfg.MinAge, plan.ListedFiles)
	if req.DryRun {
		return Outcome{Status: StatusPlanned, Reason: "would delete " + summary, Orphans: rep}
	}
	if plan.Empty() {
		return Outcome{Status: StatusNotDue, Reason: "no orphan files older than " + cfg.MinAge.String(), Orphans: rep}
	}
	res, err := orphans.Execute(ctx, r.cat, tbl, store, plan, cfg, orphans.Options{Logger: r.log})
	if res != nil {
		rep.FilesDeleted, rep.BytesDeleted, rep.NowReferenced = res.FilesDeleted, res.BytesDeleted, res.NowReferenced
		rep.DeletedReferenced = res.DeletedReferenced
		for _, f := range res.Failed {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", f.Path, f.Err))
		}
	}
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("remove orphans: %w", err), Orphans: rep}
	}
	reason := fmt.Sprintf("deleted %d of %s", rep.FilesDeleted, summary)
	if n := len(rep.NowReferenced); n > 0 {
		reason += fmt.Sprintf("; %d kept: committed since the plan (%s)", n, strings.Join(rep.NowReferenced, ", "))
	}
	return Outcome{Status: StatusSucceeded, Reason: reason, Orphans: rep}
}
