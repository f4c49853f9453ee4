#!/usr/bin/env bash
# rounds.sh: compaction beside a fast upsert writer, two maintainer binaries
# in paired rounds (issue 13, item 7). Each round restores the table to the
# same state, starts the writer, runs one binary's `run --task compact
# --force` RUNS times, stops the writer (which checks its oracle), then does
# the same for the other binary; the order alternates round by round.
#
#   go build -o /tmp/uw ./internal/bench/upsertwriter
#   internal/bench/upsertwriter/rounds.sh DIR OLD_BIN NEW_BIN [ROUNDS] [RUNS]
#
# Env: APPENDS (1000) and ROWS (20) before a first compaction, MORE (300)
# and MORE_ROWS (50) after it (1,301 snapshots, about 0.9 MB of metadata);
# PARTITIONS (0); PAUSE (0: back to back) between the writer's commits;
# PARTIAL=1 adds compact.partial_progress; TASK=expire runs expiry instead
# (max_snapshot_age 1s, retain_last 5); UW (/tmp/uw) is the writer.
# Prints one line per run: status, commit_retries, reason; and per round
# the writer's SUMMARY and ORACLE lines.
# Needs bash and python3 (to read the JSON outcome).
set -euo pipefail
dir=$1 old=$2 new=$3 rounds=${4:-6} runs=${5:-3}
uw=${UW:-/tmp/uw}
t=$dir/table
if [ ! -d "$dir/orig" ]; then
  rm -rf "$t" && mkdir -p "$t"
  cat > "$t/maintainer.yaml" <<EOF
catalog:
  name: default
  type: sql
  uri: file:$t/catalog.db
  warehouse: file://$t/warehouse
  properties: {sql.driver: sqliteshim, sql.dialect: sqlite}
lock:
  backend: local
EOF
  printf 'defaults:\n  expire: {max_snapshot_age: 1s, retain_last: 5}\n' >> "$t/maintainer.yaml"
  if [ "${PARTIAL:-0}" = 1 ]; then printf '  compact: {partial_progress: true}\n' >> "$t/maintainer.yaml"; fi
  "$uw" setup -dir "$t" -appends "${APPENDS:-1000}" -rows "${ROWS:-20}" -partitions "${PARTITIONS:-0}"
  "$new" run --config "$t/maintainer.yaml" --task compact --force > /dev/null
  "$uw" setup -dir "$t" -appends "${MORE:-300}" -rows "${MORE_ROWS:-50}" -partitions "${PARTITIONS:-0}"
  cp -a "$t" "$dir/orig" # the table's paths are absolute: runs restore it in place
fi

one() { # one BIN TAG
  rm -rf "$t" && cp -a "$dir/orig" "$t"
  "$uw" write -dir "$t" -pause "${PAUSE:-0}" > "$dir/writer-$2.log" 2>&1 &
  local w=$!
  sleep 3
  for i in $(seq 1 "$runs"); do
    "$1" run --config "$t/maintainer.yaml" --task "${TASK:-compact}" --force --output json > "$dir/$2-$i.json" 2> "$dir/$2-$i.err" || true
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); t=r.get('compact') or (r.get('expire') or {}).get('result') or {}; print(sys.argv[2], r['status'], t.get('commit_retries'), r.get('reason', r.get('error', '')))" "$dir/$2-$i.json" "$2 run$i"
  done
  kill -TERM $w && wait $w || true
  grep -E "ORACLE|SUMMARY" "$dir/writer-$2.log" | sed "s/^/$2 /"
}

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then one "$new" new$r; one "$old" old$r; else one "$old" old$r; one "$new" new$r; fi
done
