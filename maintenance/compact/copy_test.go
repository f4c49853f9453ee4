package compact

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// stringsFile writes one optional string column in row groups of rows,
// in pages of about 100 values, dictionary-encoded or plain.
func stringsFile(t *testing.T, sc *schema.GroupNode, rowGroups [][]*string, dict bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, sc, file.WithWriterProps(parquet.NewWriterProperties(
		parquet.WithDictionaryDefault(dict), parquet.WithBatchSize(100), parquet.WithDataPageSize(512))))
	for _, rows := range rowGroups {
		rg := w.AppendRowGroup()
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		var vals []parquet.ByteArray
		def := make([]int16, len(rows))
		for i, r := range rows {
			if r != nil {
				vals = append(vals, parquet.ByteArray(*r))
				def[i] = 1
			}
		}
		if _, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(vals, def, nil); err != nil {
			t.Fatal(err)
		}
		if err := rg.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readStrings(t *testing.T, b []byte) []*string {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []*string
	for rg := range pf.NumRowGroups() {
		cr, err := pf.RowGroup(rg).Column(0)
		if err != nil {
			t.Fatal(err)
		}
		rd := cr.(*file.ByteArrayColumnChunkReader)
		for rd.HasNext() {
			vals := make([]parquet.ByteArray, 64)
			def := make([]int16, 64)
			n, _, err := rd.ReadBatch(64, vals, def, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := 0
			for _, d := range def[:n] {
				if d == 0 {
					out = append(out, nil)
					continue
				}
				s := string(vals[v])
				out = append(out, &s)
				v++
			}
		}
	}
	return out
}

// Values of dictionary-encoded pages point into the chunk's dictionary,
// which outlives the chunk's pages: they are not copied while the chunk is
// read (copied in calls that end with the row groups), and still come out
// right across pages and row groups, also when a call spans row groups.
// Those of plain pages are copied, since the next page overwrites them.
func TestCopyKeepsDictionaryValuesInPlace(t *testing.T) {
	sc, err := schema.NewGroupNode("schema", parquet.Repetitions.Required, schema.FieldList{
		schema.NewByteArrayNode("s", parquet.Repetitions.Optional, -1)}, -1)
	if err != nil {
		t.Fatal(err)
	}
	var rowGroups [][]*string
	var want []*string
	for rg := range 3 {
		var rows []*string
		for i := range 1000 {
			if i%7 == 0 {
				rows = append(rows, nil)
				continue
			}
			s := fmt.Sprintf("value-%d-%d", rg, i%40)
			rows = append(rows, &s)
		}
		rowGroups = append(rowGroups, rows)
		want = append(want, rows...)
	}
	for _, c := range []struct {
		dict bool
		call int64
	}{{true, 1000}, {true, 700}, {false, 1000}, {false, 700}} {
		t.Run(fmt.Sprintf("dictionary %v, %d rows a call", c.dict, c.call), func(t *testing.T) {
			dict := c.dict
			in := stringsFile(t, sc, rowGroups, dict)
			pf, err := file.NewParquetReader(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			src, err := newCopySource(pf.MetaData().Schema, 1, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			src.open(pf)
			var out bytes.Buffer
			w := file.NewParquetWriter(&out, sc)
			rg := w.AppendBufferedRowGroup()
			l := src.leaves[0].(*leaf[parquet.ByteArray])
			kept := 0
			for {
				n, err := src.copyRows(rg, c.call)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				kept = max(kept, cap(l.arena), cap(l.spare))
			}
			if err := src.finish(); err != nil {
				t.Fatal(err)
			}
			if err := rg.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := readStrings(t, out.Bytes())
			if !slices.EqualFunc(got, want, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
				t.Fatalf("copied %d rows, not the %d written", len(got), len(want))
			}
			if c.call == 1000 && dict && kept != 0 {
				t.Fatalf("copied dictionary values: arena of %d bytes", kept)
			}
			if c.call == 1000 && !dict && kept == 0 {
				t.Fatal("kept no values of plain pages")
			}
		})
	}
}

// onePage is a page reader whose current page is set by the test.
type onePage struct {
	file.PageReader
	page file.Page
}

func (p *onePage) Page() file.Page { return p.page }

// A data page decoded over the dictionary's bytes fails the column: the
// pending values that point into the dictionary would be lost.
func TestDataPageOverTheDictionaryFails(t *testing.T) {
	buf := make([]byte, 64)
	src := &onePage{}
	p := &dictPages{PageReader: src}
	src.page = file.NewDictionaryPage(memory.NewBufferBytes(buf[:32]), 2, parquet.Encodings.Plain)
	p.Page()
	if !p.inDict(buf[4:8]) || p.inDict(buf[40:44]) {
		t.Fatal("dictionary bytes not told apart")
	}
	src.page = file.NewDataPageV1(memory.NewBufferBytes(buf[32:]), 2, parquet.Encodings.Plain, parquet.Encodings.RLE, parquet.Encodings.RLE, 32)
	if p.Page(); p.err != nil {
		t.Fatalf("a data page apart from the dictionary: %v", p.err)
	}
	src.page = file.NewDataPageV1(memory.NewBufferBytes(buf[16:48]), 2, parquet.Encodings.Plain, parquet.Encodings.RLE, parquet.Encodings.RLE, 32)
	if p.Page(); p.err == nil {
		t.Fatal("a data page over the dictionary went unnoticed")
	}
}
