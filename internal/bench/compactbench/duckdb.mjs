// DuckDB's side of compactbench: rewrites each partition's input files into
// zstd Parquet files of about 128 MB, one COPY per partition, and prints the
// rows each COPY wrote as JSON. The bench writes this file beside the
// node_modules it installed @duckdb/node-api into, so that the import below
// resolves there.
//
//	node compact.mjs PLAN.json    # {"partitions":[{"files":["/a.parquet",...],"out":"/dir"}]}
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const quote = (s) => "'" + s.replaceAll("'", "''") + "'";
const rows = [];
for (const p of plan.partitions) {
  const files = '[' + p.files.map(quote).join(', ') + ']';
  const reader = await conn.runAndReadAll(
    `COPY (SELECT * FROM read_parquet(${files})) TO ${quote(p.out)} ` +
      `(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '128MB')`);
  rows.push(Number(reader.getRows()[0][0]));
}
conn.closeSync();
console.log(JSON.stringify({ rows }));
