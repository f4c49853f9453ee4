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
# prometheus-alertmanager) when they are not on PATH. The fixture tables and
# their independent verifier are in the repository (testdata/fixtures,
# internal/testenv). It starts a throw-away redis-server on a free loopback
# port and stops it on exit.
#
# Exported for the tests:
#   MAINTAINER_TEST_REDIS_ADDR  127.0.0.1:PORT of that redis-server
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
  if [ ! -e /usr/sbin/policy-rc.d ] && [ "$(id -u)" = 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    placed_policy=1
  fi
  install_rc=0
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || install_rc=$?
  if [ -n "$placed_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
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
