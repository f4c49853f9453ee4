package maintenance

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/maintenance/manifests"
)

// ManifestsReport carries the figures of a manifest rewrite's plan and run.
// Its lists are [] when empty, never null: consumers iterate them.
type ManifestsReport struct {
	SnapshotID         int64  `json:"snapshot_id,omitempty"`
	TargetManifestSize int64  `json:"target_manifest_size_bytes"`
	TargetSource       string `json:"target_source"`
	// SmallBelow is the size under which a manifest counts as small.
	SmallBelow      int64             `json:"small_below_bytes"`
	ManifestsBefore int               `json:"manifests_before"`
	BytesBefore     int64             `json:"bytes_before"`
	SmallManifests  int               `json:"small_manifests"`
	Groups          []manifests.Group `json:"groups"`
	EstManifests    int               `json:"estimated_manifests_after"`
	// The figures of the commit: the manifests it replaced and wrote, and
	// the snapshot's manifests after it.
	ManifestsReplaced int     `json:"manifests_replaced"`
	ManifestsWritten  int     `json:"manifests_written"`
	ManifestsAfter    int     `json:"manifests_after"`
	BytesAfter        int64   `json:"bytes_after"`
	EntriesRewritten  int64   `json:"entries_rewritten"`
	Commits           []int64 `json:"commits"`
	CommitRetries     int     `json:"commit_retries"`
}

func (r *Runner) manifests(ctx context.Context, tbl *table.Table, cfg manifests.Config, req Request) Outcome {
	plan, err := manifests.PlanTable(ctx, tbl, cfg)
	if err != nil {
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("plan manifest rewrite: %w", err)}
	}
	rep := &ManifestsReport{
		SnapshotID: plan.SnapshotID, TargetManifestSize: plan.TargetSize, TargetSource: plan.TargetSource,
		SmallBelow: plan.SmallBelow, ManifestsBefore: plan.Manifests, BytesBefore: plan.ManifestBytes,
		SmallManifests: plan.SmallManifests, Groups: nonNil(plan.Groups), EstManifests: plan.EstManifestsAfter(),
		ManifestsAfter: plan.Manifests, BytesAfter: plan.ManifestBytes, Commits: []int64{},
	}
	switch {
	case plan.SnapshotID == 0 || plan.Empty():
		return Outcome{Status: StatusNotDue, Reason: plan.Reason, Manifests: rep}
	case req.DryRun:
		return Outcome{Status: StatusPlanned, Reason: "would rewrite " + plan.Reason, Manifests: rep}
	}
	res, err := manifests.Execute(ctx, r.cat, tbl, plan, cfg, manifests.Options{Logger: r.log, Head: r.metaLoc})
	rep.CommitRetries = res.CommitRetries
	if res.SnapshotID != 0 {
		rep.Commits = []int64{res.SnapshotID}
		rep.ManifestsReplaced, rep.ManifestsWritten, rep.EntriesRewritten = res.ManifestsReplaced, res.ManifestsWritten, res.Entries
		if res.ManifestsBefore > 0 { // known unless the commit was found after a lost answer
			rep.ManifestsBefore, rep.BytesBefore = res.ManifestsBefore, res.BytesBefore
			rep.ManifestsAfter, rep.BytesAfter = res.ManifestsAfter, res.BytesAfter
		}
	}
	switch {
	case err != nil:
		return Outcome{Status: StatusFailed, failure: fmt.Errorf("rewrite manifests: %w", err), Manifests: rep}
	case res.SnapshotID == 0:
		// A concurrent commit did the work (or left too little of it).
		return Outcome{Status: StatusNotDue, Reason: "after a concurrent commit: " + res.Superseded, Manifests: rep}
	}
	return Outcome{Status: StatusSucceeded, Manifests: rep,
		Reason: fmt.Sprintf("rewrote %d manifests into %d (%d entries): %d manifests (%s) before, %d (%s) after",
			rep.ManifestsReplaced, rep.ManifestsWritten, rep.EntriesRewritten,
			rep.ManifestsBefore, HumanBytes(rep.BytesBefore), rep.ManifestsAfter, HumanBytes(rep.BytesAfter))}
}
