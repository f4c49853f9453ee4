package manifests

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Reasons a plan rewrites nothing, as plan and the logs show them.
const (
	ReasonDisabled   = "manifest rewrite disabled"
	ReasonNoSnapshot = "table has no snapshot"
)

// Plan is what a rewrite of one snapshot's manifests would do. It is a value:
// PlanTable reads the manifest list only, and Execute rewrites exactly the
// groups planned (or re-plans on a newer head after a conflict).
type Plan struct {
	SnapshotID    int64
	FormatVersion int
	TargetSize    int64
	TargetSource  string // "config", "table property" or "default"
	// SmallBelow is the size under which a manifest is small: 75% of the
	// target.
	SmallBelow int64
	// Manifests and ManifestBytes are the current snapshot's.
	Manifests     int
	ManifestBytes int64
	// SmallManifests are the small manifests that share their content and
	// partition spec with another small one: those a rewrite merges.
	SmallManifests int
	// Groups are what is rewritten, by content and spec; empty when the
	// plan is not due.
	Groups []Group
	// Reason says what the plan does, or why it does nothing.
	Reason string
}

// Group is the small manifests of one content (data or deletes) and one
// partition spec: they are rewritten together, their entries sorted by
// partition, into manifests of about the target size.
type Group struct {
	Content   string `json:"content"` // "data" or "deletes"
	SpecID    int32  `json:"spec_id"`
	Manifests int    `json:"manifests"`
	Bytes     int64  `json:"bytes"`
	// Files are the live entries the manifest list counts (added and
	// existing files).
	Files           int64 `json:"files"`
	EstManifestsOut int   `json:"estimated_manifests_out"`
	inputs          []iceberg.ManifestFile
}

// Empty reports whether the plan rewrites nothing.
func (p *Plan) Empty() bool { return len(p.Groups) == 0 }

// InputManifests is the number of manifests the plan replaces.
func (p *Plan) InputManifests() int {
	n := 0
	for _, g := range p.Groups {
		n += g.Manifests
	}
	return n
}

// EstManifestsAfter is the snapshot's manifest count after the rewrite, as
// estimated from the sizes.
func (p *Plan) EstManifestsAfter() int {
	n := p.Manifests
	for _, g := range p.Groups {
		n += g.EstManifestsOut - g.Manifests
	}
	return n
}

// PlanTable plans the rewrite of tbl's current snapshot. It reads the
// snapshot's manifest list and nothing else.
func PlanTable(ctx context.Context, tbl *table.Table, cfg Config) (*Plan, error) {
	p := &Plan{FormatVersion: tbl.Metadata().Version()}
	p.TargetSize, p.TargetSource = TargetSize(cfg, tbl.Properties())
	p.SmallBelow = p.TargetSize * 3 / 4
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		p.Reason = ReasonNoSnapshot
		return p, nil
	}
	p.SnapshotID = snap.SnapshotID
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open table IO: %w", err)
	}
	list, err := snap.Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read manifest list %s of snapshot %d: %w", snap.ManifestList, snap.SnapshotID, err)
	}
	planGroups(p, list, cfg)
	return p, nil
}

type groupKey struct {
	content iceberg.ManifestContent
	spec    int32
}

// planGroups fills in p from the manifest list of its snapshot.
func planGroups(p *Plan, list []iceberg.ManifestFile, cfg Config) {
	p.Manifests = len(list)
	small := map[groupKey][]iceberg.ManifestFile{}
	for _, m := range list {
		p.ManifestBytes += m.Length()
		if m.Length() < p.SmallBelow {
			k := groupKey{m.ManifestContent(), m.PartitionSpecID()}
			small[k] = append(small[k], m)
		}
	}
	var groups []Group
	for k, ms := range small {
		if len(ms) < 2 {
			continue // nothing to merge it with
		}
		g := Group{Content: contentName(k.content), SpecID: k.spec, Manifests: len(ms), inputs: ms}
		for _, m := range ms {
			g.Bytes += m.Length()
			g.Files += int64(max(m.AddedDataFiles(), 0)) + int64(max(m.ExistingDataFiles(), 0))
		}
		g.EstManifestsOut = int(max(1, (g.Bytes+p.TargetSize-1)/p.TargetSize))
		groups = append(groups, g)
		p.SmallManifests += len(ms)
	}
	slices.SortFunc(groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Content, b.Content), cmp.Compare(a.SpecID, b.SpecID))
	})
	summary := fmt.Sprintf("%d small manifests (below %s) that can be merged, of %d", p.SmallManifests, humanBytes(p.SmallBelow), p.Manifests)
	if p.SmallManifests < cfg.MinManifests {
		p.Reason = fmt.Sprintf("%s; fewer than min_manifests (%d)", summary, cfg.MinManifests)
		return
	}
	p.Groups = groups
	p.Reason = fmt.Sprintf("%s, into about %d (about %d manifests after)", summary,
		p.EstManifestsAfter()-(p.Manifests-p.InputManifests()), p.EstManifestsAfter())
}

func contentName(c iceberg.ManifestContent) string {
	if c == iceberg.ManifestContentDeletes {
		return "deletes"
	}
	return "data"
}

// humanBytes renders a byte count with binary units, as the runner does.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
