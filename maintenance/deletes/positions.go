package deletes

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
)

// position is one deleted row: a data file and a row position in it.
type position struct {
	path string
	pos  int64
}

func comparePositions(a, b position) int {
	if c := cmp.Compare(a.path, b.path); c != 0 {
		return c
	}
	return cmp.Compare(a.pos, b.pos)
}

// readPositions reads the (file_path, pos) pairs of a Parquet
// position-delete file; the optional row column is not read. The pairs read
// must be as many as the file's metadata says it holds.
func readPositions(ctx context.Context, fs iceio.IO, df iceberg.DataFile) ([]position, error) {
	f, err := fs.Open(df.FilePath())
	if err != nil {
		return nil, fmt.Errorf("open position-delete file %s: %w", df.FilePath(), err)
	}
	defer f.Close()
	out, err := decodePositions(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read position-delete file %s: %w", df.FilePath(), err)
	}
	if int64(len(out)) != df.Count() {
		return nil, fmt.Errorf("position-delete file %s holds %d positions, its manifest entry says %d", df.FilePath(), len(out), df.Count())
	}
	return out, nil
}

func decodePositions(ctx context.Context, r parquet.ReaderAtSeeker) ([]position, error) {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	sc := pf.MetaData().Schema
	pathIdx, posIdx := sc.ColumnIndexByName("file_path"), sc.ColumnIndexByName("pos")
	if pathIdx < 0 || posIdx < 0 {
		return nil, errors.New("no file_path and pos columns")
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(ctx, []int{pathIdx, posIdx}, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []position
	for rr.Next() {
		rec := rr.RecordBatch()
		paths, ok1 := rec.Column(0).(*array.String)
		pos, ok2 := rec.Column(1).(*array.Int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("file_path is %s and pos %s, want string and int64", rec.Column(0).DataType(), rec.Column(1).DataType())
		}
		for i := range int(rec.NumRows()) {
			if paths.IsNull(i) || pos.IsNull(i) {
				return nil, fmt.Errorf("row %d has a null file_path or pos", len(out))
			}
			out = append(out, position{path: paths.Value(i), pos: pos.Value(i)})
		}
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// positionSchema is the schema of the position-delete files this task
// writes: the spec's reserved field ids, no row column.
var positionSchema = arrow.NewSchema([]arrow.Field{
	{Name: "file_path", Type: arrow.BinaryTypes.String, Metadata: fieldID(filePathFieldID)},
	{Name: "pos", Type: arrow.PrimitiveTypes.Int64, Metadata: fieldID(posFieldID)},
}, nil)

func fieldID(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(id)})
}

// encodePositions writes sorted positions as a Parquet position-delete file.
func encodePositions(ps []position) ([]byte, error) {
	pb := array.NewStringBuilder(memory.DefaultAllocator)
	defer pb.Release()
	ob := array.NewInt64Builder(memory.DefaultAllocator)
	defer ob.Release()
	for _, p := range ps {
		pb.Append(p.path)
		ob.Append(p.pos)
	}
	paths, pos := pb.NewArray(), ob.NewArray()
	defer paths.Release()
	defer pos.Release()
	rec := array.NewRecordBatch(positionSchema, []arrow.Array{paths, pos}, int64(len(ps)))
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(positionSchema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// positionFile describes a written position-delete file for its manifest:
// the partition of its sources and full bounds of both columns, so that
// readers find the data file of a file-scoped delete from its bounds.
func positionFile(spec iceberg.PartitionSpec, partition map[int]any, path string, size int64, ps []position) (iceberg.DataFile, error) {
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentPosDeletes, path, iceberg.ParquetFile,
		partition, nil, nil, int64(len(ps)), size)
	if err != nil {
		return nil, fmt.Errorf("describe position-delete file %s: %w", path, err)
	}
	minPos := slices.MinFunc(ps, func(a, b position) int { return cmp.Compare(a.pos, b.pos) }).pos
	maxPos := slices.MaxFunc(ps, func(a, b position) int { return cmp.Compare(a.pos, b.pos) }).pos
	n := int64(len(ps))
	b.ValueCounts(map[int]int64{filePathFieldID: n, posFieldID: n}).
		NullValueCounts(map[int]int64{filePathFieldID: 0, posFieldID: 0}).
		LowerBoundValues(map[int][]byte{filePathFieldID: []byte(ps[0].path), posFieldID: le64(minPos)}).
		UpperBoundValues(map[int][]byte{filePathFieldID: []byte(ps[len(ps)-1].path), posFieldID: le64(maxPos)})
	return b.Build(), nil
}

func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
