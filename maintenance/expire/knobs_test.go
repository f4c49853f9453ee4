package expire

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// evolve adds schema 1 (one more column, made current) and specs 1 and 2
// (2 made the default): spec 1 is never written with.
func evolve(t *testing.T, f *fixture) {
	t.Helper()
	cur := f.tbl.Metadata().CurrentSchema()
	fields := append(cur.Fields(), iceberg.NestedField{ID: cur.HighestFieldID() + 1, Name: "note", Type: iceberg.PrimitiveTypes.String})
	s1 := iceberg.NewSchema(1, fields...)
	byUser := iceberg.NewPartitionSpecID(1, iceberg.PartitionField{SourceIDs: []int{3}, FieldID: 1001, Name: "user_bucket", Transform: iceberg.BucketTransform{NumBuckets: 4}})
	byMonth := iceberg.NewPartitionSpecID(2, iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1002, Name: "event_month", Transform: iceberg.MonthTransform{}})
	if _, _, err := f.cat.CommitTable(context.Background(), f.opt.Identifier(), nil, []table.Update{
		table.NewAddSchemaUpdate(s1), table.NewSetCurrentSchemaUpdate(-1),
		table.NewAddPartitionSpecUpdate(&byUser, false), table.NewAddPartitionSpecUpdate(&byMonth, false),
		table.NewSetDefaultSpecUpdate(-1),
	}); err != nil {
		t.Fatalf("evolve: %v", err)
	}
	f.tbl = f.reload(t)
	if f.tbl.Metadata().CurrentSchema().ID != 1 || f.tbl.Metadata().DefaultPartitionSpec() != 2 {
		t.Fatalf("evolved to schema %d, spec %d", f.tbl.Metadata().CurrentSchema().ID, f.tbl.Metadata().DefaultPartitionSpec())
	}
}

func ids(tbl *table.Table) (schemas, specs []int) {
	for _, s := range tbl.Metadata().Schemas() {
		schemas = append(schemas, s.ID)
	}
	for _, s := range tbl.Metadata().PartitionSpecs() {
		specs = append(specs, s.ID())
	}
	slices.Sort(schemas)
	slices.Sort(specs)
	return schemas, specs
}

func rowCount(t *testing.T, tbl *table.Table) int64 {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("read table: %v", err)
	}
	defer at.Release()
	return at.NumRows()
}

// evolvedPlan makes an evolved table of appends single-file appends and
// plans its expiry with clean_expired_metadata.
func evolvedPlan(t *testing.T, appends int) (*fixture, Config, *Plan) {
	t.Helper()
	f := newTable(t, appends, 50, 2, nil)
	evolve(t, f)
	cfg := strictConfig()
	cfg.CleanExpiredMetadata = true
	plan, err := PlanTable(context.Background(), f.tbl, cfg, lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg, plan
}

// clean_expired_metadata removes the schemas and specs that no retained
// snapshot uses, and never the current schema, the default spec, a schema
// a retained snapshot names or a spec a retained manifest was written with.
func TestCleanExpiredMetadata(t *testing.T) {
	ctx := context.Background()
	// The current snapshot was written with schema 0 and spec 0: both stay;
	// spec 1 was never used and goes.
	f, cfg, plan := evolvedPlan(t, 6)
	if len(plan.Expired) != 5 || len(plan.RemovedSchemas) != 0 || !slices.Equal(plan.RemovedSpecs, []int{1}) {
		t.Fatalf("plan expires %d, removes schemas %v, specs %v; want 5, [], [1]", len(plan.Expired), plan.RemovedSchemas, plan.RemovedSpecs)
	}

	// A commit under schema 1 (a delete of whole files): the retained
	// snapshot names schema 1, so schema 0 is unused; its manifests were
	// written with spec 0, which stays.
	f.deleteAppends(t, 3)
	if id := f.tbl.Metadata().CurrentSnapshot().SchemaID; id == nil || *id != 1 {
		t.Fatalf("the delete's snapshot names schema %v; want 1", id)
	}
	rows := rowCount(t, f.tbl)
	plan, err := PlanTable(ctx, f.tbl, cfg, lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.RemovedSchemas, []int{0}) || !slices.Equal(plan.RemovedSpecs, []int{1}) {
		t.Fatalf("plan removes schemas %v, specs %v; want [0], [1]", plan.RemovedSchemas, plan.RemovedSpecs)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Deleter: &localDeleter{}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.SchemasRemoved, []int{0}) || !slices.Equal(res.SpecsRemoved, []int{1}) {
		t.Errorf("result removed schemas %v, specs %v", res.SchemasRemoved, res.SpecsRemoved)
	}
	after := f.reload(t)
	schemas, specs := ids(after)
	if !slices.Equal(schemas, []int{1}) || !slices.Equal(specs, []int{0, 2}) {
		t.Fatalf("after: schemas %v, specs %v; want [1], [0 2]", schemas, specs)
	}
	if got := rowCount(t, after); got != rows {
		t.Fatalf("rows after %d; want %d", got, rows)
	}
}

// Without clean_expired_metadata (the default) no schema or spec goes; the
// run's deletes go in requests of delete_batch_size files.
func TestCleanExpiredMetadataOff(t *testing.T) {
	ctx := context.Background()
	f := newTable(t, 4, 50, 2, nil)
	evolve(t, f)
	f.deleteAppends(t, 2)
	cfg := strictConfig()
	cfg.DeleteBatchSize = 2
	plan, err := PlanTable(ctx, f.tbl, cfg, lastTS(f.tbl).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	d := &localDeleter{}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Deleter: d})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(plan.Files); n < 3 || int(d.calls.Load()) != (n+1)/2 || res.FilesDeleted() != n {
		t.Errorf("%d files deleted in %d requests; want %d in requests of 2", res.FilesDeleted(), d.calls.Load(), n)
	}
	schemas, specs := ids(f.reload(t))
	if len(plan.Expired) == 0 || !slices.Equal(schemas, []int{0, 1}) || !slices.Equal(specs, []int{0, 1, 2}) {
		t.Fatalf("expired %d; schemas %v, specs %v; want all kept", len(plan.Expired), schemas, specs)
	}
}

// A spec made the default after planning is one the plan meant to remove:
// the commit's requirement catches it and the re-plan keeps it.
func TestCleanExpiredMetadataDefaultSpecChanged(t *testing.T) {
	ctx := context.Background()
	f, cfg, plan := evolvedPlan(t, 4)
	if !slices.Equal(plan.RemovedSpecs, []int{1}) {
		t.Fatalf("plan removes specs %v; want [1]", plan.RemovedSpecs)
	}
	if _, _, err := f.handle(t).CommitTable(ctx, f.opt.Identifier(), nil, []table.Update{table.NewSetDefaultSpecUpdate(1)}); err != nil {
		t.Fatal(err)
	}
	res, err := Execute(ctx, f.cat, f.tbl, plan, cfg, Options{Deleter: &localDeleter{}})
	if err != nil {
		t.Fatal(err)
	}
	after := f.reload(t)
	if _, specs := ids(after); !slices.Contains(specs, 1) || after.Metadata().DefaultPartitionSpec() != 1 {
		t.Fatalf("specs after %v (default %d): the new default was removed", specs, after.Metadata().DefaultPartitionSpec())
	}
	if res.CommitRetries == 0 || len(res.SpecsRemoved) != 0 {
		t.Errorf("retries %d, specs removed %v; want a conflict and none removed", res.CommitRetries, res.SpecsRemoved)
	}
}

// Deletes go in requests of delete_batch_size files.
func TestDeleteBatchSize(t *testing.T) {
	files := make([]File, 25)
	for i := range files {
		files[i] = File{Path: fmt.Sprintf("s3://b/t/data/%02d.parquet", i), Kind: KindData}
	}
	for _, batch := range []int{1000, 10, 1} {
		d := &sizes{}
		res := &Result{Deleted: map[FileKind]Count{}}
		if failed := deleteFiles(context.Background(), d, files, batch, 1, res, nil); len(failed) != 0 {
			t.Fatalf("failed %v", failed)
		}
		want := (len(files) + batch - 1) / batch
		if len(d.calls) != want || slices.Max(d.calls) > batch || res.FilesDeleted() != len(files) {
			t.Errorf("batch %d: calls of %v files; want %d calls of at most %d", batch, d.calls, want, batch)
		}
	}
	for _, bad := range []int{-1, 1001} {
		c := DefaultConfig()
		c.DeleteBatchSize = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "delete_batch_size") {
			t.Errorf("delete_batch_size %d: %v", bad, err)
		}
	}
}

type sizes struct{ calls []int }

func (s *sizes) Delete(_ context.Context, paths []string) ([]string, map[string]error) {
	s.calls = append(s.calls, len(paths))
	return paths, nil
}

// A retained snapshot that names no schema (old v1 metadata) could use any:
// no schema is removed; unused specs still are.
func TestCleanExpiredMetadataSnapshotWithoutSchema(t *testing.T) {
	f := newTable(t, 3, 50, 2, nil)
	evolve(t, f)
	f.deleteAppends(t, 1)
	doc, err := json.Marshal(f.tbl.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	for _, s := range raw["snapshots"].([]any) {
		delete(s.(map[string]any), "schema-id")
	}
	if doc, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	meta, err := table.ParseMetadataBytes(doc)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[int64]bool{meta.CurrentSnapshot().SnapshotID: true}
	var p Plan
	p.unusedMetadata(meta, keep, map[int32]bool{0: true}, nil)
	if len(p.RemovedSchemas) != 0 || !slices.Equal(p.RemovedSpecs, []int{1}) {
		t.Fatalf("removes schemas %v, specs %v; want none, [1]", p.RemovedSchemas, p.RemovedSpecs)
	}
	// With the schema ids back, schema 0 is unused.
	p = Plan{}
	p.unusedMetadata(f.tbl.Metadata(), keep, map[int32]bool{0: true}, nil)
	if !slices.Equal(p.RemovedSchemas, []int{0}) {
		t.Fatalf("removes schemas %v; want [0]", p.RemovedSchemas)
	}
}
