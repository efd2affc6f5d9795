#!/usr/bin/env bash
# The one test command (make test, and CI through .ci/run): installs what the tests
# need, checks formatting and vet, starts a throw-away Samba AD domain controller,
# a pair of replicating ones (test/harness/samba/pair.sh) and two domains joined by a
# forest trust (test/harness/samba/forest.sh), runs every Go test with the race
# detector against them, and always tears them down.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for cmd in samba samba-tool ldapsearch jq redis-server redis-cli chromium; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("$cmd")
done
if ((${#need[@]})); then
  echo "test: installing Samba AD DC and Redis packages (missing: ${need[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq samba samba-ad-dc samba-ad-provision ldap-utils jq redis-server redis-tools chromium >/dev/null
fi
# Prometheus (promtool for deploy/prometheus, the server for the alert
# end-to-end test in test/suite/faults). Without recommends: prometheus-node-exporter would
# come with it and listen on every address where the package scripts start services.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "test: installing Prometheus (promtool and the server)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

echo "test: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "test: go vet"
go vet ./...

state=$(mktemp -d /tmp/dirgate-test.XXXXXX)
pair_pid=""
forest_pid=""
cleanup() {
  if [[ -n $pair_pid ]]; then kill -- "-$pair_pid" 2>/dev/null; wait "$pair_pid" 2>/dev/null; fi
  if [[ -n $forest_pid ]]; then kill -- "-$forest_pid" 2>/dev/null; wait "$forest_pid" 2>/dev/null; fi
  # The forest stops beside the others (about 5 s of waiting for its DCs).
  bash test/harness/samba/forest.sh stop "$state/forest" &
  local forest_stop=$!
  bash test/harness/samba/pair.sh stop "$state/pair" || true
  bash test/harness/samba/dc.sh stop "$state/samba" || true
  wait "$forest_stop" || true
  rm -rf "$state"
}
trap cleanup EXIT
# The two replicating DCs of test/harness/samba/pair.sh (failover tests) start in the
# background while the single DC starts: they live in network namespaces, so
# their ports do not clash with the single DC's on 127.0.0.1. Their own namespace
# prefix and subnet keep them apart from a pair started by make samba-pair-start.
# setsid: a failure or Ctrl-C stops the whole start (its process group).
# DIRGATE_PAIR_FIXTURE=1: the pair holds the project fixture too, for the
# conformance suite against two DCs (upstream/ldap TestConformancePair).
mkdir -p "$state/pair"
DIRGATE_PAIR_FIXTURE=1 DIRGATE_PAIR_NS_PREFIX=dgtest DIRGATE_PAIR_NET=10.231.78 \
  setsid bash test/harness/samba/pair.sh start "$state/pair" >"$state/pair.log" 2>&1 &
pair_pid=$!
# The two domains of test/harness/samba/forest.sh (tests of several domains) start beside
# them, in namespaces of their own, apart from a forest of make samba-forest-start.
mkdir -p "$state/forest"
DIRGATE_FOREST_NS_PREFIX=dgtfor DIRGATE_FOREST_NET=10.231.79 \
  setsid bash test/harness/samba/forest.sh start "$state/forest" >"$state/forest.log" 2>&1 &
forest_pid=$!
bash test/harness/samba/dc.sh start "$state/samba"
set -a; . "$state/samba/env"; set +a
if ! wait "$pair_pid"; then
  pair_pid=""
  cat "$state/pair.log"; echo "test: pair.sh start failed"; exit 1
fi
pair_pid=""
grep -F 'timings:' "$state/pair.log" || true
set -a; . "$state/pair/env"; set +a
if ! wait "$forest_pid"; then
  forest_pid=""
  cat "$state/forest.log"; echo "test: forest.sh start failed"; exit 1
fi
forest_pid=""
grep -F 'timings:' "$state/forest.log" || true
set -a; . "$state/forest/env"; set +a

echo "test: go test -race"
# The fault, failover, chaos and hostile-input suites run next, on their own (make
# test-faults), one package at a time, against the same DC and pair.
mapfile -t pkgs < <(go list ./... | grep -v -e /test/suite/faults -e /test/suite/hostile -e /test/harness/faultproxy -e /test/suite/failover -e /test/suite/redisfailover -e '/test/suite/chaos$')
go test -race -count=1 -timeout 20m "${pkgs[@]}"
# Modules of their own that go.mod replaces a dependency with (third_party/*/PATCHES.md).
for mod in third_party/*/go.mod; do
  (cd "$(dirname "$mod")" && go vet ./... && go test -race -count=1 ./...)
done

echo "test: fault and hostile-input suites"
make --no-print-directory test-faults
