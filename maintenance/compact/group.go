package compact

import (
	"fmt"
	"strings"
)

// applyBudget keeps the groups that fit the run's budgets, max_bytes_per_run
// and max_files_to_rewrite, in the plan's order, as Spark's budgets do: the
// first group runs whatever its size (else a group larger than a budget
// would never be compacted); the budgets stop the groups after it. Each
// partition with groups left says which budget left them, and how many.
func (p *Plan) applyBudget(cfg Config) {
	if cfg.MaxBytesPerRun <= 0 && cfg.MaxFilesToRewrite <= 0 {
		return
	}
	var kept []Group
	var bytes int64
	var files int
	type left struct{ bytes, files int }
	skipped := map[string]*left{}
	for i, g := range p.Groups {
		overBytes := cfg.MaxBytesPerRun > 0 && bytes+g.Bytes > cfg.MaxBytesPerRun
		overFiles := cfg.MaxFilesToRewrite > 0 && files+g.Files > cfg.MaxFilesToRewrite
		if i > 0 && (overBytes || overFiles) {
			l := skipped[g.key]
			if l == nil {
				l = &left{}
				skipped[g.key] = l
			}
			if overBytes {
				l.bytes++
			} else {
				l.files++
			}
			continue
		}
		bytes += g.Bytes
		files += g.Files
		kept = append(kept, g)
	}
	p.Groups = kept
	for i := range p.Partitions {
		d := &p.Partitions[i]
		l := skipped[d.key]
		if l == nil {
			continue
		}
		d.Groups -= l.bytes + l.files
		var why []string
		if l.bytes > 0 {
			why = append(why, fmt.Sprintf("%s: %d group(s) left for a later run", ReasonBudget, l.bytes))
		}
		if l.files > 0 {
			why = append(why, fmt.Sprintf("%s: %d group(s) left for a later run", ReasonFileBudget, l.files))
		}
		d.Skipped = strings.Join(why, "; ")
	}
}
