package deletes

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/iceberg-maintainer/maintainer/internal/gen"
	"github.com/iceberg-maintainer/maintainer/internal/testenv"
)

// lostAnswer is the real catalog whose commit answers are lost: with land
// the commit is made first, without it never.
type lostAnswer struct {
	table.CatalogIO
	land bool
}

func (c lostAnswer) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	if c.land {
		if _, _, err := c.CatalogIO.CommitTable(ctx, ident, reqs, ups); err != nil {
			return nil, "", err
		}
	}
	return nil, "", errors.New("504 gateway timeout")
}

// An unanswered commit never removes the merged file (it may be live): when
// the commit landed the run finds its snapshot and succeeds, when it did
// not the run fails with ErrCommitUnknown and the file stays for the
// orphan pass.
func TestUnknownCommitOutcomeKeepsFiles(t *testing.T) {
	for _, land := range []bool{true, false} {
		t.Run(map[bool]string{true: "landed", false: "lost"}[land], func(t *testing.T) {
			ctx := context.Background()
			opt := gen.Options{Appends: 2, RowsPerAppend: 20, Seed: 7, FormatVersion: 2, Workers: 1}
			cat, tbl, _ := testenv.GeneratedTable(t, opt)
			d := &deleteTable{t: t, cat: cat, tbl: tbl, opt: opt}
			files := d.dataFiles()
			d.addDeletes(position{files[0], 1})
			d.addDeletes(position{files[1], 2})
			wrapped := table.New(d.tbl.Identifier(), d.tbl.Metadata(), d.tbl.MetadataLocation(), d.tbl.FS, lostAnswer{cat, land})
			cfg := DefaultConfig()
			cfg.MinInputFiles = 2
			plan, err := PlanTable(ctx, wrapped, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var written []string
			res, err := Execute(ctx, cat, wrapped, plan, cfg, Options{})
			for _, f := range testenv.Files(t, strings.TrimPrefix(d.tbl.Location(), "file://")) {
				if strings.Contains(f, "/deletes-") {
					written = append(written, f)
				}
			}
			if len(written) != 1 {
				t.Fatalf("merged files on disk: %q, want the one written kept", written)
			}
			if _, serr := os.Stat(written[0]); serr != nil {
				t.Fatal(serr)
			}
			if land {
				if err != nil || res.SnapshotID == 0 || res.FilesWritten != 1 {
					t.Fatalf("landed commit: %+v, %v; want found and reported", res, err)
				}
				return
			}
			if !errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("lost commit: %v; want ErrCommitUnknown", err)
			}
		})
	}
}
