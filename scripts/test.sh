#!/usr/bin/env bash
# The project's test command.
#
#   scripts/test.sh                         # go vet + go test of ./... and of deploy/kubernetes/validate
#   scripts/test.sh ./config/               # only these packages
#   scripts/test.sh -run TestX ./config/    # go test flags pass through
#   scripts/test.sh -run TestX              # flags only: packages default to ./...
#
# Arguments are passed to `go test`; those that look like packages (./x, ../x,
# /abs, all, std, or the module path) replace the default ./... and are also
# what `go vet` checks. Give flag values with `=` when they look like a path
# (-coverprofile=./c.out).
#
# On a fresh Debian machine (as root, with Go) it installs what the tests need:
# redis-server, promtool and amtool (apt: redis-server, prometheus,
# prometheus-alertmanager) when they are not on PATH, and the PostgreSQL server
# (apt: postgresql) when /usr/lib/postgresql/*/bin has none. The fixture tables
# and their independent verifier are in the repository (testdata/fixtures,
# internal/testenv). It starts a throw-away redis-server and a throw-away
# PostgreSQL cluster (in a temporary folder) on free loopback ports, and stops
# both and removes the cluster on exit. It also builds SeaweedFS from the Go
# module proxy when .cache/weed has no binary of the pinned version (a few
# minutes, once), and starts `weed server` (master, volume server, filer, S3
# gateway) on free loopback ports with a random access key, killed on exit.
#
# Exported for the tests:
#   MAINTAINER_TEST_REDIS_ADDR  127.0.0.1:PORT of that redis-server
#   MAINTAINER_TEST_POSTGRES_DSN  postgres://USER:PASSWORD@127.0.0.1:PORT/DB of
#                               that cluster (a superuser: tests create databases)
#   MAINTAINER_TEST_S3_ENDPOINT  http://127.0.0.1:PORT of SeaweedFS's S3 gateway
#   MAINTAINER_TEST_S3_ACCESS_KEY, MAINTAINER_TEST_S3_SECRET_KEY  its credentials
#   MAINTAINER_TEST_S3_MASTER   its master as weed shell takes it: 127.0.0.1:PORT.GRPC_PORT
#   MAINTAINER_TEST_WEED        the weed binary (tests start private servers)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command -v go >/dev/null || die "go is not on PATH"

# --- Debian packages, installed only when their command is missing:
# redis-server (lock tests), promtool and amtool (alert rules and the
# Alertmanager config in deploy/prometheus).
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v promtool >/dev/null || missing+=(prometheus)
command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
# PostgreSQL (SQL-catalog tests): Debian keeps its server binaries off PATH.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (apt-get)"
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "${missing[*]} missing and this is not root; install them (apt-get install ${missing[*]})"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq >&2
  # policy-rc.d keeps the packages' services from starting (only their
  # binaries are needed); it is removed whether the install works or not.
  placed_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null &&
      "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d && placed_policy=1
  fi
  install_rc=0
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || install_rc=$?
  if [ -n "$placed_policy" ]; then "${sudo[@]}" rm -f /usr/sbin/policy-rc.d; fi
  [ "$install_rc" = 0 ] || die "apt-get install ${missing[*]} failed (exit $install_rc)"
fi
# The tests of deploy/ skip without these tools on a developer's machine;
# here they were installed, so a missing one is a failure.
export MAINTAINER_REQUIRE_TOOLS=1

# --- a private redis-server on a free loopback port.
redis_pid=
redis_log=$(mktemp "${TMPDIR:-/tmp}/maintainer-redis.XXXXXX")
cleanup() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -f "$redis_log"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
redis_pong() {
  local reply
  reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'PING\r\n' >&3 && IFS= read -r -t 1 r <&3 && printf '%s' "$r") 2>/dev/null) || return 1
  [ "${reply%$'\r'}" = "+PONG" ]
}

redis_port=
for _ in $(seq 1 20); do
  port=$((20000 + RANDOM % 40000))
  port_in_use "$port" && continue
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --daemonize no --protected-mode yes --logfile '' >"$redis_log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do
    kill -0 "$redis_pid" 2>/dev/null || break
    if redis_pong "$port"; then redis_port=$port; break; fi
    sleep 0.05
  done
  [ -n "$redis_port" ] && break
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
done
[ -n "$redis_port" ] || { cat "$redis_log" >&2; die "could not start redis-server"; }

export MAINTAINER_TEST_REDIS_ADDR=127.0.0.1:$redis_port
log "redis-server on $MAINTAINER_TEST_REDIS_ADDR (pid $redis_pid)"

# --- PostgreSQL: a throw-away cluster on a free loopback port, for the SQL
# catalog on PostgreSQL. postgres refuses to run as root, so as root the
# cluster belongs to the postgres user that Debian's package creates.
pg_bin=$(dirname "$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
[ -x "$pg_bin/initdb" ] || die "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
pg_as=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres user to run the PostgreSQL server as"
  pg_as=(runuser -u postgres --)
fi
pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/maintainer-pg.XXXXXX")
pg_data=$pg_dir/data
# pg runs one of the PostgreSQL tools as the cluster's owner, from a folder
# that user may enter.
pg() {
  local tool=$1
  shift
  (cd "$pg_dir" && "${pg_as[@]}" "$pg_bin/$tool" "$@")
}
pg_cleanup() {
  if [ -f "$pg_data/postmaster.pid" ]; then
    pg pg_ctl stop -D "$pg_data" -m immediate -w -t 30 -s >/dev/null 2>&1 ||
      kill -KILL "$(head -n 1 "$pg_data/postmaster.pid")" 2>/dev/null || true
  fi
  rm -rf "$pg_dir"
}
trap 'pg_cleanup; cleanup' EXIT

pg_password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$pg_password" >"$pg_dir/password"
if [ ${#pg_as[@]} -gt 0 ]; then chown -R postgres: "$pg_dir"; fi
# Passwords over TCP (the tests' DSN carries one); trust on the socket, which
# lives in pg_dir (mode 0700).
pg initdb -D "$pg_data" -U maintainer --pwfile="$pg_dir/password" --auth-host=scram-sha-256 \
  --auth-local=trust --no-locale -E UTF8 --no-sync >"$pg_dir/initdb.log" 2>&1 ||
  { cat "$pg_dir/initdb.log" >&2; die "initdb of a PostgreSQL cluster in $pg_data failed"; }

# Durability is pointless in a cluster deleted on exit: no fsync. The e2e
# tests run several maintainers at once, each with its own connections.
pg_port=
for _ in $(seq 1 20); do
  port=$((20000 + RANDOM % 40000))
  port_in_use "$port" && continue
  if pg pg_ctl start -D "$pg_data" -l "$pg_dir/postgres.log" -w -t 60 -s -o "-c listen_addresses=127.0.0.1 -p $port \
      -k '$pg_dir' -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null 2>&1; then
    for _ in $(seq 1 200); do
      if pg pg_isready -q -h 127.0.0.1 -p "$port"; then pg_port=$port; break; fi
      sleep 0.05
    done
    [ -n "$pg_port" ] && break
  fi
  # Lost the port to another process (or never ready): stop whatever started.
  pg pg_ctl stop -D "$pg_data" -m immediate -w -t 30 -s >/dev/null 2>&1 || true
done
[ -n "$pg_port" ] || { cat "$pg_dir/postgres.log" >&2 || true; die "could not start PostgreSQL (logs above)"; }
pg createdb -h "$pg_dir" -p "$pg_port" -U maintainer maintainer ||
  die "could not create the database maintainer on the PostgreSQL at 127.0.0.1:$pg_port"

export MAINTAINER_TEST_POSTGRES_DSN="postgres://maintainer:$pg_password@127.0.0.1:$pg_port/maintainer?sslmode=disable"
log "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port (data in $pg_data)"

# --- SeaweedFS: a real S3 server (`weed server`: master, volume server,
# filer and S3 gateway in one process) on free loopback ports, with data in a
# temporary folder. The binary is built once from the module proxy's copy of
# the source (`go install` refuses the module: its go.mod has replace
# directives) and cached in .cache/weed/VERSION/weed; delete it to rebuild.
# Failing to build or start it is fatal here, as for the tools above.
weed_module=github.com/seaweedfs/seaweedfs
weed_version=v0.0.0-20261109003541-7506e5f91cd6
weed_bin=$repo_root/.cache/weed/$weed_version/weed
weed_dir=$(mktemp -d "${TMPDIR:-/tmp}/maintainer-weed.XXXXXX")
weed_pid=
weed_cleanup() {
  # SIGKILL: the data is thrown away, and a graceful stop waits for the
  # volume server's preStopSeconds.
  if [ -n "$weed_pid" ]; then
    kill -KILL "$weed_pid" 2>/dev/null || true
    wait "$weed_pid" 2>/dev/null || true
  fi
  rm -rf "$weed_dir"
}
trap 'weed_cleanup; pg_cleanup; cleanup' EXIT

# build_weed downloads the module's source, copies it somewhere writable (the
# module cache is read-only; -mod=mod may complete go.sum) and builds ./weed.
build_weed() {
  local info src build_start=$SECONDS
  # Outside any module, so the repository's go.mod and go.sum are untouched.
  info=$(cd "$weed_dir" && go mod download -json "$weed_module@$weed_version") ||
    { log "go mod download $weed_module@$weed_version failed: $info"; return 1; }
  src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [ -n "$src" ] && [ -d "$src" ] || { log "go mod download $weed_module@$weed_version gave no source folder: $info"; return 1; }
  cp -R "$src" "$weed_dir/src" && chmod -R u+w "$weed_dir/src" || return 1
  mkdir -p "$(dirname "$weed_bin")" || return 1
  # Built under a temporary name, so an interrupted build leaves no binary.
  # No VCS stamp: the copy is no checkout (and must not pick up one around it).
  # -trimpath keeps the temporary folder out of the build cache keys, so a
  # fresh clone (an empty .cache/) rebuilds from the Go build cache in seconds.
  (cd "$weed_dir/src" && GOFLAGS='-mod=mod -buildvcs=false -trimpath' go build -o "$weed_bin.tmp.$$" ./weed) || { rm -f "$weed_bin.tmp.$$"; return 1; }
  mv -f "$weed_bin.tmp.$$" "$weed_bin" || return 1
  rm -rf "$weed_dir/src"
  log "built SeaweedFS in $((SECONDS - build_start))s"
}
if [ ! -x "$weed_bin" ]; then
  log "building SeaweedFS $weed_version into ${weed_bin#"$repo_root"/} (once; a few minutes)"
  build_weed || die "could not build SeaweedFS ($weed_module@$weed_version)"
fi

# http_get prints the response (headers and body) of GET path on a
# loopback port, without curl; it fails when nothing answers in time.
http_get() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null
}

weed_access_key=maintainer-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
weed_secret_key=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
printf '{"identities":[{"name":"maintainer-test","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
  "$weed_access_key" "$weed_secret_key" >"$weed_dir/s3.json"
chmod 600 "$weed_dir/s3.json"
weed_port_names=(master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port s3.port.grpc)
weed_ready=
for _ in $(seq 1 5); do
  # Every listener gets an explicit port (weed would otherwise take HTTP
  # port + 10000 for gRPC, which may be in use).
  ports=()
  while [ ${#ports[@]} -lt ${#weed_port_names[@]} ]; do
    port=$((20000 + RANDOM % 40000))
    port_in_use "$port" && continue
    case " ${ports[*]} " in *" $port "*) continue ;; esac
    ports+=("$port")
  done
  port_args=()
  for i in "${!weed_port_names[@]}"; do port_args+=("-${weed_port_names[$i]}=${ports[$i]}"); done
  rm -rf "$weed_dir/data" && mkdir -p "$weed_dir/data"
  # The same flags and environment as internal/s3test/seaweed's Start:
  # loopback only, buckets only on request, small volumes, no Iceberg/Lance
  # listeners, no telemetry, one master that elects itself at once, and no
  # hold on the first volume allocation (WEED_* variables set master.toml keys).
  (cd "$weed_dir" && exec env WEED_MASTER_VOLUME_GROWTH_ALLOCATION_DEFERRAL=0s "$weed_bin" server \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$weed_dir/data" \
    -filer -s3 -s3.config="$weed_dir/s3.json" -s3.autoCreateBucket=false \
    -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.volumeSizeLimitMB=64 -volume.max=0 -master.telemetry=false -master.peers=none \
    "${port_args[@]}" >"$weed_dir/weed.log" 2>&1) &
  weed_pid=$!
  # Ready when the S3 gateway answers and the master lists the filer and the
  # volume server: a fresh filer announces itself only after seconds of
  # looking for peers, and until then S3 writes wait for its lock ring.
  # Each check can take 13s (3s HTTP, 10s shell): bound the wait by time,
  # 120s an attempt, not by a count of checks.
  weed_deadline=$((SECONDS + 120))
  while [ "$SECONDS" -lt "$weed_deadline" ]; do
    kill -0 "$weed_pid" 2>/dev/null || break
    if http_get "${ports[6]}" / | grep -q '^HTTP/' &&
      cluster=$(echo cluster.ps | timeout 10 "$weed_bin" shell -master="127.0.0.1:${ports[0]}.${ports[1]}" -connectTimeout=2s 2>/dev/null) &&
      grep -q '^\* filers [1-9]' <<<"$cluster" && grep -q '^\* volume servers [1-9]' <<<"$cluster"; then
      weed_ready=1
      break
    fi
    sleep 0.2
  done
  [ -n "$weed_ready" ] && break
  kill -KILL "$weed_pid" 2>/dev/null || true
  wait "$weed_pid" 2>/dev/null || true
  weed_pid=
done
[ -n "$weed_ready" ] || { tail -n 50 "$weed_dir/weed.log" >&2 || true; die "could not start SeaweedFS (log above)"; }

export MAINTAINER_TEST_S3_ENDPOINT=http://127.0.0.1:${ports[6]}
export MAINTAINER_TEST_S3_ACCESS_KEY=$weed_access_key
export MAINTAINER_TEST_S3_SECRET_KEY=$weed_secret_key
# SeaweedFS's address syntax for an explicit gRPC port: host:port.grpc.
export MAINTAINER_TEST_S3_MASTER=127.0.0.1:${ports[0]}.${ports[1]}
export MAINTAINER_TEST_WEED=$weed_bin
log "SeaweedFS S3 gateway on $MAINTAINER_TEST_S3_ENDPOINT (master $MAINTAINER_TEST_S3_MASTER, pid $weed_pid, data in $weed_dir)"

# --- packages vs go test flags.
module=$(go list -m)
pkgs=()
for a in "$@"; do
  case $a in
    -*) ;;
    ./* | ../* | /* | . | .. | all | std | "$module" | "$module"/*) pkgs+=("$a") ;;
  esac
done
test_args=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  pkgs=(./...)
  test_args+=(./...)
fi

go vet "${pkgs[@]}"
go test -count=1 -timeout 60m "${test_args[@]}"

# The Kubernetes manifests are checked by a module of their own (its
# Kubernetes dependencies stay out of the binary's go.mod); only when the
# whole tree is tested. Its first build of the static binary is slow.
if [ "${pkgs[*]}" = "./..." ]; then
  (cd deploy/kubernetes/validate && go vet ./... && go test -count=1 -timeout 40m ./...)
fi
