#!/usr/bin/env bash
# large.sh runs a Samba AD DC in a network namespace of its own, seeded with
# large groups, for the benchmarks of large listings on a domain controller
# (never part of make test: seeding 20,000 users takes minutes).
#
#   large.sh start  STATE_DIR [SIZES]  provision the DC (test/harness/samba/dc.sh, no
#                                      fixture) inside the namespace, add
#                                      max(SIZES) users and one group per size
#                                      holding the first SIZE of them (default
#                                      20000; e.g. 2000,5000,20000), write
#                                      STATE_DIR/env and print it
#   large.sh stop   STATE_DIR          stop the DC, delete the namespace
#   large.sh status STATE_DIR          exit 0 when the DC answers, 3 not
#
# The namespace (DIRGATE_LARGE_NETNS, default dirgate-large) has only lo, so the
# DC's fixed ports never meet the single test DC's on the host; run clients
# with `ip netns exec <namespace> ...`. See test/harness/samba/README.md, "A large group".
set -euo pipefail

readonly LOG_TAG=large.sh
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
# shellcheck source=test/harness/samba/lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() { echo "usage: $0 start STATE_DIR [SIZES] | stop STATE_DIR | status STATE_DIR" >&2; exit 2; }
(($# >= 2)) || usage
STATE=${2%/}
[[ -n $STATE ]] || usage

# The namespace a start used is recorded, so stop removes that one.
netns() {
  if [[ -f $STATE/large.netns ]]; then cat "$STATE/large.netns"; else echo "${DIRGATE_LARGE_NETNS:-dirgate-large}"; fi
}

cmd_start() {
  local sizes=${1:-20000} ns t0 max=0 s
  [[ $sizes =~ ^[0-9]+(,[0-9]+)*$ ]] || die "SIZES must be counts separated by commas, e.g. 2000,20000"
  for s in ${sizes//,/ }; do ((s > max)) && max=$s; done
  ((max > 0)) || die "SIZES must hold a positive count"
  [[ $(id -u) == 0 ]] && command -v ip >/dev/null || die "needs root and ip (iproute2) for the network namespace"
  [[ -x /usr/bin/python3 ]] || die "needs /usr/bin/python3 (Samba's Python bindings)"
  t0=$(now_ms)
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
  ns=$(netns)
  if ! ip netns list | grep -qw -- "$ns"; then
    ip netns add "$ns"
  fi
  echo "$ns" >"$STATE/large.netns"
  ip netns exec "$ns" ip link set lo up
  # No project fixture: the groups are the point, and dc.sh's fixture add alone
  # takes 20 s to minutes.
  mkdir -p "$STATE/no-fixture"
  timed dc env DIRGATE_SAMBA_FIXTURE_DIR="$STATE/no-fixture" ip netns exec "$ns" bash "$SCRIPT_DIR/dc.sh" start "$STATE"
  local dir; dir=$(cat "$STATE/current")
  # Straight into sam.ldb beside the running DC (large_seed.py says why); tdb
  # locks keep the DC's own reads consistent.
  timed seed /usr/bin/python3 "$SCRIPT_DIR/large_seed.py" "$dir/dc/etc/smb.conf" "$dir/dc/private/sam.ldb" \
    "$BASE_DN" "$max" "$sizes"
  {
    echo "# Written by test/harness/samba/large.sh start: run clients with ip netns exec $ns"
    echo "DIRGATE_LARGE_NETNS=$ns"
    echo "DIRGATE_LARGE_SIZES=$sizes"
    echo "DIRGATE_LARGE_OU=$(q "OU=dirgate-large,$BASE_DN")"
  } >>"$STATE/env"
  TIMINGS+=("total=$(since "$t0")ms")
  log "timings: ${TIMINGS[*]}"
  log "env file $STATE/env:"
  cat "$STATE/env"
}

cmd_stop() {
  local ns; ns=$(netns)
  if ip netns list | grep -qw -- "$ns"; then
    ip netns exec "$ns" bash "$SCRIPT_DIR/dc.sh" stop "$STATE"
    ip netns del "$ns"
  fi
  rm -rf -- "$STATE/no-fixture" "$STATE/large.netns"
  log "stopped"
}

case $1 in
  start) (($# <= 3)) || usage; cmd_start "${3:-}" ;;
  stop) (($# == 2)) || usage; [[ -d $STATE ]] && STATE=$(cd "$STATE" && pwd); cmd_stop ;;
  status) (($# == 2)) || usage; [[ -d $STATE ]] && STATE=$(cd "$STATE" && pwd); ip netns exec "$(netns)" bash "$SCRIPT_DIR/dc.sh" status "$STATE" ;;
  *) usage ;;
esac
