#!/usr/bin/env bash
# pair.sh runs two real, replicating Samba AD domain controllers of the domain
# CORP.EXAMPLE.COM, each in a network namespace of its own, for tests of
# failover between DCs. Nothing leaves the machine: the DCs listen only on
# addresses of a bridge this script creates (10.231.77.0/24 by default).
#
#   pair.sh start  STATE_DIR      provision DC1, join DC2, seed, write STATE_DIR/env
#   pair.sh stop   STATE_DIR      stop both, remove namespaces, bridge and files
#   pair.sh status STATE_DIR      say what runs and answers (exit 0 both up, 3 not)
#   pair.sh kill N STATE_DIR      SIGKILL DC N's samba process group (a crash)
#   pair.sh stop N STATE_DIR      stop DC N gracefully (its database stays)
#   pair.sh start N STATE_DIR     start DC N again, wait until LDAPS answers
#   pair.sh linkdown N STATE_DIR  silently drop every packet to and from DC N
#   pair.sh linkup N STATE_DIR    undo linkdown
#   pair.sh delay N MS STATE_DIR  hold every chunk of LDAPS to and from DC N MS ms each way
#   pair.sh undelay N STATE_DIR   undo delay
#   pair.sh pause-inbound N STATE_DIR   DC N stops pulling changes (DISABLE_INBOUND_REPL)
#   pair.sh resume-inbound N STATE_DIR  undo pause-inbound
#   pair.sh replicate STATE_DIR   pull the domain NC both ways now
#   pair.sh modify N STATE_DIR    apply the LDIF on stdin as Administrator on DC N
#
# See test/harness/samba/README.md ("Two replicating DCs") for the env contract, how
# each verb works and measured timings.
set -euo pipefail

readonly LOG_TAG=pair.sh
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
# shellcheck source=test/harness/samba/lib.sh
. "$SCRIPT_DIR/lib.sh"
readonly SMOKE_DIR="$SCRIPT_DIR/testdata"
# DIRGATE_PAIR_FIXTURE=1 seeds the project fixture into DC1 too, for the conformance
# suite against the two DCs (upstream/ldap TestConformancePair; test/run.sh sets it).
# Off by default: the other pair tests need the smoke objects only, and the fixture
# adds a minute or more.
FIXTURE_DIR=$(realpath -m "${DIRGATE_SAMBA_FIXTURE_DIR:-$SCRIPT_DIR/../fixture/testdata}")
readonly FIXTURE_DIR
readonly START_TIMEOUT=${DIRGATE_SAMBA_START_TIMEOUT:-60}
readonly DOMAIN=corp.example.com
readonly SITE=Default-First-Site-Name
# The DCs need these Samba services: ldap; cldap (the join finds the DC
# and its site with a CLDAP ping); rpc (epmapper, drsuapi, dnsserver:
# the join and samba-tool drs/dns talk DCE/RPC); drepl and kcc (replication and
# its topology); kdc (DRS binds with Kerberos to the other DC's GUID SPN); dns
# (the _msdcs zone that locates the other DC, and SRV discovery for tests).
# OWNERS/NAMESPACE names the STATE_DIR whose pair made the namespace.
readonly OWNERS=/run/dirgate-pair
readonly SERVICES="ldap cldap rpc drepl kcc kdc dns"

# ------------------------------------------------------------ configuration ---

# load_conf fixes the network and names for this STATE_DIR: from
# STATE_DIR/pair.conf once started (so later verbs use what start used),
# otherwise from DIRGATE_PAIR_NET (first three octets of a /24) and
# DIRGATE_PAIR_NS_PREFIX.
load_conf() {
  NET=${DIRGATE_PAIR_NET:-10.231.77}
  NS_PREFIX=${DIRGATE_PAIR_NS_PREFIX:-dgdc}
  if [[ -f $STATE/pair.conf ]]; then . "$STATE/pair.conf"; fi
  [[ $NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "DIRGATE_PAIR_NET=$NET: want three octets, e.g. 10.231.77"
  [[ $NS_PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "DIRGATE_PAIR_NS_PREFIX=$NS_PREFIX: want 1-8 lower-case letters/digits"
  BRIDGE=${NS_PREFIX}br
  DIR=$STATE/p
  LOG_DIR=$DIR/log
}
ns() { echo "$NS_PREFIX$1"; }              # namespace of DC N (lib.sh's net_up and the rest)
host_if() { echo "$NS_PREFIX$1h"; }        # DC N's veth end on the bridge
ns_if() { echo "$NS_PREFIX$1n"; }          # DC N's veth end in its namespace
ip_of() { echo "$NET.1$1"; }               # DC1 10.231.77.11, DC2 .12
mac_of() { printf '02:64:67:00:00:%02x\n' "$1"; } # fixed, for permanent neighbours
dcdir() { echo "$DIR/dc$1"; }
dc_fqdn() { echo "dc$1.$DOMAIN"; }
in_ns() { local n=$1; shift; ip netns exec "$(ns "$n")" "$@"; }
dc_exec() { in_ns "$@"; }                  # where DC N's samba runs (lib.sh's start_dc)
check_n() { [[ ${1:-} == 1 || ${1:-} == 2 ]] || die "DC number must be 1 or 2, got '${1:-}'"; }
admin_pw() { cat "$DIR/secrets/admin.pw"; }
url_of() { echo "ldaps://$(ip_of "$1"):636"; }
# on N TOOL ARGS...: run an ldap-utils tool as Administrator against DC N.
on() { local n=$1; shift; LDAPS_URL=$(url_of "$n") as_admin "$@"; }

ensure_pair_tools() {
  [[ $(id -u) == 0 ]] || die "network namespaces need root"
  ensure_packages
  if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1 || ! command -v ss >/dev/null 2>&1; then
    log "ip, tc or ss missing; installing iproute2"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >&2 || die "apt-get install iproute2 failed"
  fi
  if ! command -v nft >/dev/null 2>&1; then
    log "nft missing (delay N MS needs it); installing nftables"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >&2 || die "apt-get install nftables failed"
  fi
  local c
  for c in ip tc ss nft python3 testparm samba_spnupdate; do
    command -v "$c" >/dev/null 2>&1 || die "$c missing (iproute2, nftables, python3, samba, samba-ad-dc)"
  done
}

# --------------------------------------------------------------------- samba ---

# dc_options N prints the smb.conf options both provision and join set.
# dns forwarder: without it provision copies the namespace's resolv.conf (the
# DC itself), and each name outside the zone (Kerberos asks for TXT
# _kerberos.COM) then loops through the DC's own DNS until it stops
# answering. Nothing listens on 127.0.0.1:53 in the namespace, so such a
# query fails at once and never leaves the machine (check_forwarder).
dc_options() {
  local n=$1 d; d=$(dcdir "$n")
  printf -- '--option=%s\n' \
    "netbios name=DC$n" "interfaces=$(ip_of "$n")" "bind interfaces only=yes" \
    "server services=$SERVICES" \
    "tls enabled=yes" "tls keyfile=$DIR/tls/key$n.pem" "tls certfile=$DIR/tls/cert$n.pem" \
    "tls cafile=$DIR/tls/ca.pem" \
    "pid directory=$d/run" "log file=$d/log/samba.log" \
    "dns forwarder=127.0.0.1" \
    "dreplsrv:notify_interval=1" "dreplsrv:periodic_interval=10" \
    "dreplsrv:periodic_startup_interval=1" "kccsrv:periodic_interval=60" \
    "kccsrv:periodic_startup_interval=1"
}

provision_dc1() {
  local d; d=$(dcdir 1)
  local opts; mapfile -t opts < <(dc_options 1)
  if ! in_ns 1 samba-tool domain provision --targetdir="$d" --realm="$REALM" --domain="$NETBIOS" \
    --server-role=dc --dns-backend=SAMBA_INTERNAL --host-name=dc1 --host-ip="$(ip_of 1)" \
    --adminpass="$(admin_pw)" "${opts[@]}" >"$DIR/log/provision.log" 2>&1; then
    tail -n 30 "$DIR/log/provision.log" >&2; die "samba-tool domain provision failed"
  fi
  password_policy "$d" "$DIR/log/provision.log"
}

join_dc2() {
  local d; d=$(dcdir 2)
  local opts; mapfile -t opts < <(dc_options 2)
  if ! in_ns 2 samba-tool domain join "$REALM" DC --server="$(ip_of 1)" --targetdir="$d" \
    --dns-backend=SAMBA_INTERNAL -U "$NETBIOS\\Administrator" --password="$(admin_pw)" --use-kerberos=off \
    "${opts[@]}" >"$DIR/log/join.log" 2>&1; then
    tail -n 30 "$DIR/log/join.log" >&2; die "samba-tool domain join failed"
  fi
}

check_forwarder() {
  # testparm exits 1 over the cache directory samba creates at its first start.
  local f; f=$(testparm -s "$(dcdir "$1")/etc/smb.conf" --parameter-name="dns forwarder" 2>/dev/null) || true
  [[ $f == 127.0.0.1 ]] || die "DC$1: dns forwarder is '$f', want 127.0.0.1"
}

# spnupdate N gives DC N's machine account its replication SPNs (Samba's
# dnsupdate service would): the other DC binds to them to pull changes.
spnupdate() {
  local n=$1 d; d=$(dcdir "$n")
  in_ns "$n" samba_spnupdate -s "$d/etc/smb.conf" >>"$DIR/log/spnupdate.log" 2>&1 \
    || { tail -n 20 "$DIR/log/spnupdate.log" >&2; die "DC$n: samba_spnupdate failed"; }
}

# dns_records: the DC locator's records for DC2 (provision made DC1's; the
# join made dc2's A record and its GUID CNAME, not the SRV records).
# Each samba-tool is mostly Python start-up: they run side by side.
dns_records() {
  local rec pids=() pid
  for rec in "_ldap._tcp.dc" "_ldap._tcp.$SITE._sites.dc"; do
    add_record 1 "_msdcs.$DOMAIN" "$rec" SRV "dc2.$DOMAIN 389 0 100" & pids+=($!)
  done
  for rec in "_ldap._tcp" "_ldap._tcp.$SITE._sites"; do
    add_record 1 "$DOMAIN" "$rec" SRV "dc2.$DOMAIN 389 0 100" & pids+=($!)
  done
  add_record 1 "$DOMAIN" dc2 A "$(ip_of 2)" & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || die "adding DC2's DNS records failed"; done
}
add_record() { # add_record ON_DC ZONE NAME TYPE DATA; an existing record is fine
  local out
  if ! out=$(samba-tool dns add "$(ip_of "$1")" "$2" "$3" "$4" "$5" -U "$NETBIOS\\Administrator" \
    --password="$(admin_pw)" --use-kerberos=off 2>&1); then
    [[ $out == *"Record already exists"* ]] || { echo "$out" >&2; die "dns add $3 $4 failed"; }
  fi
  echo "$out" >>"$DIR/log/dns.log"
}

# drs TOOLARGS...: samba-tool drs as Administrator (NTLM: this namespace
# cannot resolve the realm for Kerberos).
drs() { samba-tool drs "$@" -U "$NETBIOS\\Administrator" --password="$(admin_pw)" --use-kerberos=off; }

# replicate_to DEST SRC: DC DEST pulls the domain NC from DC SRC now.
replicate_to() {
  drs replicate "$(ip_of "$1")" "DC$2" "$BASE_DN" >>"$DIR/log/replicate.log" 2>&1 \
    || { tail -n 5 "$DIR/log/replicate.log" >&2; die "DC$1 pulling from DC$2 failed"; }
}

# wait_replicated DN ON_DC: until DC ON_DC holds DN (the smoke seed crossing).
wait_replicated() { # wait_replicated DN ON_DC [SECONDS]
  local deadline=$(( $(date +%s) + ${3:-30} ))
  until on "$2" ldapsearch -LLL -s base -b "$1" dn >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || die "$1 did not reach DC$2 within ${3:-30}s"
    sleep 0.1
  done
}

# kcc_dc1: DC1 learns to pull from DC2 through its KCC; run it now rather
# than wait for its next period. DS_BUSY means its periodic run is under way.
kcc_dc1() {
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    drs kcc "$(ip_of 1)" >>"$DIR/log/kcc.log" 2>&1 && return 0
    sleep 1
  done
  tail -n 3 "$DIR/log/kcc.log" >&2; die "samba-tool drs kcc on DC1 failed 10 times"
}

seed_dc1() {
  create_service_account
  seed_ldif ldapadd "$SMOKE_DIR/smoke.ldif" smoke-seed
  apply_post "$SMOKE_DIR/smoke-post.json" smoke-post
  if pair_fixture; then
    seed_ldif ldapadd "$FIXTURE_DIR/samba-seed.ldif" fixture-seed
    if [[ -f $FIXTURE_DIR/samba-modify.ldif ]]; then seed_ldif ldapmodify "$FIXTURE_DIR/samba-modify.ldif" fixture-modify; fi
    if [[ -f $FIXTURE_DIR/samba-post.json ]]; then apply_post "$FIXTURE_DIR/samba-post.json" fixture-post; fi
  fi
}
pair_fixture() { [[ ${DIRGATE_PAIR_FIXTURE:-0} != 0 && -f $FIXTURE_DIR/samba-seed.ldif ]]; }
last_fixture_dn() { sed -n 's/^dn: //p' "$FIXTURE_DIR/samba-seed.ldif" | tail -n 1; }
last_smoke_dn() { sed -n 's/^dn: //p' "$SMOKE_DIR/smoke.ldif" | tail -n 1; }

# --------------------------------------------------------------------- env ---

write_env() {
  local tmp="$STATE/env.tmp"
  {
    echo "# Written by test/harness/samba/pair.sh start; source with: set -a; . $(q "$STATE/env"); set +a"
    echo "DIRGATE_TEST_PAIR_URLS=$(q "$(url_of 1) $(url_of 2)")"
    echo "DIRGATE_TEST_PAIR_DC1_URL=$(url_of 1)"
    echo "DIRGATE_TEST_PAIR_DC2_URL=$(url_of 2)"
    echo "DIRGATE_TEST_PAIR_DC1_NAME=dc1.$DOMAIN"
    echo "DIRGATE_TEST_PAIR_DC2_NAME=dc2.$DOMAIN"
    echo "DIRGATE_TEST_PAIR_DNS=$(ip_of 1):53"
    echo "DIRGATE_TEST_PAIR_DNS_SERVERS=$(q "$(ip_of 1):53 $(ip_of 2):53")"
    echo "DIRGATE_TEST_PAIR_DOMAIN=$DOMAIN"
    echo "DIRGATE_TEST_PAIR_SITE=$SITE"
    echo "DIRGATE_TEST_PAIR_BASE_DN=$(q "$BASE_DN")"
    echo "DIRGATE_TEST_PAIR_BIND_DN=$(q "$SVC_DN")"
    echo "DIRGATE_TEST_PAIR_PASSWORD_FILE=$(q "$DIR/secrets/svc.pw")"
    echo "DIRGATE_TEST_PAIR_ADMIN_DN=$(q "$ADMIN_DN")"
    echo "DIRGATE_TEST_PAIR_ADMIN_PASSWORD_FILE=$(q "$DIR/secrets/admin.pw")"
    echo "DIRGATE_TEST_PAIR_CA_FILE=$(q "$DIR/tls/ca.pem")"
    echo "DIRGATE_TEST_PAIR_NAMESPACES=$(q "$(ns 1) $(ns 2)")"
    echo "DIRGATE_TEST_PAIR_STATE_DIR=$(q "$STATE")"
    echo "DIRGATE_TEST_PAIR_SCRIPT=$(q "$SCRIPT_DIR/pair.sh")"
    if pair_fixture; then echo "DIRGATE_TEST_PAIR_FIXTURE_DIR=$(q "$FIXTURE_DIR")"; fi
  } >"$tmp"
  mv "$tmp" "$STATE/env"
}

# ---------------------------------------------------------------- commands ---

cmd_stop_all() {
  local n
  if [[ -d $DIR ]]; then for n in 1 2; do undelay "$n" 2>/dev/null || true; stop_dc "$n"; done; fi
  net_down
  rm -rf -- "$DIR"
  rm -f "$STATE/env" "$STATE/pair.conf"
  log "stopped"
}

cmd_start_all() {
  local t0 t1; t0=$(now_ms)
  timed packages ensure_pair_tools
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
  load_conf
  check_free pair.conf "set DIRGATE_PAIR_NS_PREFIX and DIRGATE_PAIR_NET"
  cmd_stop_all
  local sock="$DIR/dc1/private/ldap_priv/ldapi"
  ((${#sock} <= 107)) || die "STATE_DIR path too long for Samba's sockets ($sock): use a shorter one"
  printf 'NET=%s\nNS_PREFIX=%s\n' "$NET" "$NS_PREFIX" >"$STATE/pair.conf"
  mkdir -p "$DIR/log" "$DIR/secrets"
  chmod 700 "$DIR/secrets"
  trap 'rc=$?; if ((rc)); then stop_dc 1 KILL; stop_dc 2 KILL; log "start failed; logs kept in $DIR (pair.sh stop removes them)"; fi' EXIT
  (umask 077; gen_password >"$DIR/secrets/admin.pw")
  ldap_env
  timed network net_up
  timed tls make_tls "$DIR/tls" "dirgate pair test CA" "$DIR/log/tls.log"
  timed provision provision_dc1
  check_forwarder 1
  timed start-dc1 start_dc 1
  LDAPS_URL=$(url_of 1)
  # The seed goes to DC1 while DC2 joins (CPU waits less for Python start-up);
  # what the join misses reaches DC2 by replication, checked at the end.
  bg seed seed_dc1
  timed spnupdate-dc1 spnupdate 1
  timed join join_dc2
  check_forwarder 2
  bg dns dns_records
  timed start-dc2 start_dc 2
  timed spnupdate-dc2 spnupdate 2
  await seed dns
  timed kcc kcc_dc1
  t1=$(now_ms)
  bg pull-dc2 replicate_to 2 1
  bg pull-dc1 replicate_to 1 2
  await pull-dc2 pull-dc1
  wait_replicated "$SVC_DN" 2
  wait_replicated "$(last_smoke_dn)" 2
  if pair_fixture; then wait_replicated "$(last_fixture_dn)" 2 180; fi
  TIMINGS+=("first-replication=$(since "$t1")ms")
  write_env
  TIMINGS+=("total=$(since "$t0")ms")
  log "pair ready: $(url_of 1) $(url_of 2), env file $STATE/env"
  log "timings: ${TIMINGS[*]}"
}

cmd_status() {
  local n d pid rc=0
  [[ -d $DIR ]] || { echo "no pair in $STATE"; return 3; }
  for n in 1 2; do
    d=$(dcdir "$n")
    if ! pid=$(pid_of "$d"); then echo "DC$n: not running"; rc=3; continue; fi
    if LDAPNETWORK_TIMEOUT=2 on "$n" ldapsearch -s base -b '' >/dev/null 2>&1; then
      echo "DC$n: pid $pid, $(url_of "$n") answers"
    else
      echo "DC$n: pid $pid, $(url_of "$n") does not answer a bind"; rc=3
    fi
    if tc qdisc show dev "$(host_if "$n")" 2>/dev/null | grep -q blackhole; then echo "DC$n: link down"; fi
    if [[ -f $(delay_pid "$n") ]]; then echo "DC$n: LDAPS delayed"; fi
  done
  return "$rc"
}

# link N up|down: a blackhole qdisc on both ends of DC N's veth drops every
# packet either way (netem is not in this kernel; this needs no module).
link() {
  local n=$1 how=$2
  if [[ $how == down ]]; then
    tc qdisc replace dev "$(host_if "$n")" root blackhole
    in_ns "$n" tc qdisc replace dev "$(ns_if "$n")" root blackhole
  else
    tc qdisc del dev "$(host_if "$n")" root 2>/dev/null || true
    in_ns "$n" tc qdisc del dev "$(ns_if "$n")" root 2>/dev/null || true
  fi
}

# delay N MS: new LDAPS connections to DC N are redirected (nft, in DC N's
# namespace) to delayrelay.py, which passes each chunk on MS ms late both ways;
# the connections already open are cut (ss -K) so that their clients reconnect
# through it. netem, which would delay every packet, is not in this kernel.
# Replication between the DCs does not use LDAPS and is not delayed.
readonly DELAY_PORT=6636
delay_pid() { echo "$DIR/delay$1.pid"; }
delay() {
  local n=$1 ms=$2 out
  [[ $ms =~ ^[0-9]{1,5}$ ]] || die "delay: MS must be a number of milliseconds, got '$ms'"
  command -v nft >/dev/null 2>&1 || die "delay needs nft (apt-get install nftables; pair.sh start installs it)"
  undelay "$n"
  out="$DIR/log/delay$n.log"
  rm -f "$out" # the wait below must not read the last relay's line
  in_ns "$n" setsid python3 "$SCRIPT_DIR/delayrelay.py" "$DELAY_PORT" "$(ip_of "$n"):636" "$ms" \
    "$(delay_pid "$n")" </dev/null >"$out" 2>&1 &
  # Python's start-up (through a pyenv shim, say) takes seconds on a loaded machine.
  for _ in $(seq 600); do grep -q listening "$out" 2>/dev/null && break; sleep 0.05; done
  grep -q listening "$out" || { cat "$out" >&2; undelay "$n"; die "DC$n: delayrelay.py did not start within 30 s"; }
  in_ns "$n" nft -f - <<EOF || die "DC$n: nft redirect failed"
table ip dirgate_delay {
  chain prerouting {
    type nat hook prerouting priority dstnat;
    tcp dport 636 redirect to :$DELAY_PORT
  }
}
EOF
  # Only clients' connections: the relay's own to the DC (from the DC's address) may
  # already carry a client that came in through the redirect.
  in_ns "$n" ss -K state established "( sport = :636 ) and not ( dst $(ip_of "$n") )" >/dev/null 2>&1 || true
}
# undelay removes the redirect, so that new connections go to the DC itself, and
# then stops the relay. The connections that went through the relay are left with
# nothing behind them: their packets no longer reach anything that answers, and their
# clients hear nothing (no close, no reset; measured: an openssl s_client through the
# relay was still open seconds later), as when a NAT or firewall between loses its
# state. The other order would refuse new connections for the instant between.
undelay() {
  local n=$1 f pid; f=$(delay_pid "$n")
  in_ns "$n" nft delete table ip dirgate_delay 2>/dev/null || true
  if [[ -f $f ]]; then
    pid=$(tr -dc 0-9 <"$f")
    if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
    rm -f "$f"
  fi
}

inbound() { # inbound N +|-
  drs options "$(ip_of "$1")" --dsa-option="$2DISABLE_INBOUND_REPL" >>"$DIR/log/drs-options.log" 2>&1 \
    || { tail -n 5 "$DIR/log/drs-options.log" >&2; die "DC$1: drs options $2DISABLE_INBOUND_REPL failed"; }
}

usage() {
  echo "usage: $0 start|stop|status|replicate STATE_DIR" >&2
  echo "       $0 start|stop|kill|linkdown|linkup|undelay|pause-inbound|resume-inbound|modify N STATE_DIR" >&2
  echo "       $0 delay N MS STATE_DIR" >&2
  exit 2
}

case $# in
  2) VERB=$1; N=""; STATE=${2%/} ;;
  3) VERB=$1; N=$2; STATE=${3%/}; check_n "$N" ;;
  4) VERB=$1; N=$2; MS=$3; STATE=${4%/}; check_n "$N"; [[ $VERB == delay ]] || usage ;;
  *) usage ;;
esac
[[ -n $STATE ]] || usage
if [[ $VERB == start && -z $N ]]; then cmd_start_all; exit; fi
[[ -d $STATE ]] || die "no pair state in $STATE"
STATE=$(cd "$STATE" && pwd)
load_conf
ldap_env
case $VERB:${N:+n} in
  stop:) cmd_stop_all ;;
  status:) cmd_status ;;
  replicate:) replicate_to 2 1; replicate_to 1 2 ;;
  start:n) start_dc "$N" ;;
  stop:n) stop_dc "$N" ;;
  kill:n) stop_dc "$N" KILL ;;
  linkdown:n) link "$N" down ;;
  linkup:n) link "$N" up ;;
  delay:n) delay "$N" "$MS" ;;
  undelay:n) undelay "$N" ;;
  pause-inbound:n) inbound "$N" + ;;
  resume-inbound:n) inbound "$N" - ;;
  modify:n) on "$N" ldapmodify ;;
  *) usage ;;
esac
