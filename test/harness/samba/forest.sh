#!/usr/bin/env bash
# forest.sh runs two Samba AD domains, CORP.EXAMPLE.COM and FABRIKAM.EXAMPLE.NET,
# each with one DC in a network namespace of its own, joined by a two-way forest
# trust, for tests of directories that span several domains. Nothing leaves the
# machine: the DCs listen only on addresses of a bridge this script creates
# (10.231.90.0/24 by default).
#
#   forest.sh start  STATE_DIR   provision both, trust, seed, write STATE_DIR/env
#   forest.sh stop   STATE_DIR   stop both, remove namespaces, bridge and files
#   forest.sh status STATE_DIR   say what runs and answers (exit 0 all up, 3 not)
#   forest.sh stop N STATE_DIR   stop domain N's DC (1 CORP, 2 FABRIKAM): its domain down
#   forest.sh start N STATE_DIR  start domain N's DC again, wait until LDAPS answers
#
# See test/harness/samba/README.md ("Two domains with a forest trust") for the env
# contract, what each step needs and measured timings.
set -euo pipefail

readonly LOG_TAG=forest.sh
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
# shellcheck source=test/harness/samba/lib.sh
. "$SCRIPT_DIR/lib.sh"
readonly START_TIMEOUT=${DIRGATE_SAMBA_START_TIMEOUT:-60}
# OWNERS/NAMESPACE names the STATE_DIR whose forest made the namespace.
readonly OWNERS=/run/dirgate-forest
# s3fs (smbd) and rpc: the trust's LSA calls reach each DC over SMB (ncacn_np);
# winbindd: netlogon's trust verification and lookups in the other domain;
# kdc: cross-realm tickets; cldap: samba-tool finds the other DC with a CLDAP
# ping; dns: each DC serves its zone (the other DC finds it through the forwarder).
readonly SERVICES="s3fs rpc ldap cldap kdc winbindd dns"
readonly SEED_OU_RDN=OU=dirgate-forest

# Domain N (1 CORP, 2 FABRIKAM): names, and the prefix of its env variables.
realm_of() { case $1 in 1) echo CORP.EXAMPLE.COM ;; 2) echo FABRIKAM.EXAMPLE.NET ;; esac; }
netbios_of() { case $1 in 1) echo CORP ;; 2) echo FABRIKAM ;; esac; }
base_of() { case $1 in 1) echo 'DC=corp,DC=example,DC=com' ;; 2) echo 'DC=fabrikam,DC=example,DC=net' ;; esac; }
dns_of() { realm_of "$1" | tr 'A-Z' 'a-z'; }
host_of() { case $1 in 1) echo corpdc ;; 2) echo fabdc ;; esac; }
prefix_of() { case $1 in 1) echo cr ;; 2) echo fb ;; esac; } # seed names: cr-global, fb-user1, ...

# ------------------------------------------------------------ configuration ---

# load_conf fixes the network and names for this STATE_DIR: from
# STATE_DIR/forest.conf once started, otherwise from DIRGATE_FOREST_NET (first
# three octets of a /24) and DIRGATE_FOREST_NS_PREFIX.
load_conf() {
  NET=${DIRGATE_FOREST_NET:-10.231.90}
  NS_PREFIX=${DIRGATE_FOREST_NS_PREFIX:-dgfo}
  if [[ -f $STATE/forest.conf ]]; then . "$STATE/forest.conf"; fi
  [[ $NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "DIRGATE_FOREST_NET=$NET: want three octets, e.g. 10.231.90"
  [[ $NS_PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "DIRGATE_FOREST_NS_PREFIX=$NS_PREFIX: want 1-8 lower-case letters/digits"
  BRIDGE=${NS_PREFIX}br
  ROOT=$STATE/f
  LOG_DIR=$ROOT/log
  DIR=$ROOT # lib.sh's: the CA is $DIR/tls/ca.pem; domain N moves it to DC N's directory
}
ns() { echo "$NS_PREFIX$1"; }              # namespace of DC N (lib.sh's net_up and the rest)
host_if() { echo "$NS_PREFIX$1h"; }        # DC N's veth end on the bridge
ns_if() { echo "$NS_PREFIX$1n"; }          # DC N's veth end in its namespace
ip_of() { echo "$NET.1$1"; }               # CORP's DC 10.231.90.11, FABRIKAM's .12
mac_of() { printf '02:64:66:00:00:%02x\n' "$1"; } # fixed, for permanent neighbours
dcdir() { echo "$ROOT/dc$1"; }             # Samba's target directory, and lib.sh's DIR
dc_fqdn() { echo "$(host_of "$1").$(dns_of "$1")"; }
url_of() { echo "ldaps://$(ip_of "$1"):636"; }
in_ns() { local n=$1; shift; ip netns exec "$(ns "$n")" "$@"; }
# domain N points lib.sh at domain N: its names, directory and LDAPS URL.
domain() {
  use_domain "$(realm_of "$1")" "$(netbios_of "$1")" "$(base_of "$1")"
  DIR=$(dcdir "$1") LDAPS_URL=$(url_of "$1")
}
# on N TOOL ARGS...: an ldap-utils tool as Administrator against DC N.
on() { local n=$1; shift; ( domain "$n"; as_admin "$@" ); }
admin_pw() { cat "$(dcdir "$1")/secrets/admin.pw"; }

# dc_exec N CMD...: CMD in DC N's network namespace and a mount namespace of its
# own, where DC N's winbindd socket directory is mounted on /run/samba/winbindd:
# libwbclient (smbd, samba-tool, wbinfo) looks only there, whatever smb.conf
# says. /run/samba is a fresh tmpfs in that namespace only, so nothing under
# the host's /run changes. ip netns exec already gives a mount namespace of its
# own (slave propagation); unshare makes it private too. KRB5_CONFIG names both
# realms' KDCs.
dc_exec() {
  local n=$1 d; shift; d=$(dcdir "$n")
  KRB5_CONFIG=$d/krb5.conf ip netns exec "$(ns "$n")" unshare --mount --propagation private \
    bash -c 'mount -t tmpfs -o size=1m,mode=0755 dirgate-forest /run/samba && mkdir /run/samba/winbindd &&
      mount --bind "$1" /run/samba/winbindd && shift && exec "$@"' dc_exec "$d/winbindd" "$@"
}

ensure_forest_tools() {
  [[ $(id -u) == 0 ]] || die "network and mount namespaces need root"
  ensure_packages
  local missing=() c
  for c in ip:iproute2 unshare:util-linux wbinfo:winbind testparm:samba-common-bin; do
    command -v "${c%%:*}" >/dev/null 2>&1 || missing+=("${c#*:}")
  done
  if ((${#missing[@]})); then
    log "missing: ${missing[*]}; installing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
  fi
  [[ -x /usr/bin/python3 ]] || die "/usr/bin/python3 missing (the DNS forwarder needs it)"
}

# --------------------------------------------------------------------- DNS ---

# The forwarder (forestdns.py) on $NET.1:53 sends each domain's names to its
# DC and refuses every other name. Each DC forwards what it does not hold
# there: so CORP's DC finds FABRIKAM's DC and the other way round, and a name
# outside both domains cannot bounce between them.
dns_up() {
  /usr/bin/python3 "$SCRIPT_DIR/forestdns.py" "$NET.1" "$ROOT/dns.pid" \
    "$(dns_of 1)=$(ip_of 1)" "$(dns_of 2)=$(ip_of 2)" </dev/null >"$LOG_DIR/dns.log" 2>&1 &
  for _ in $(seq 200); do grep -q listening "$LOG_DIR/dns.log" 2>/dev/null && return 0; sleep 0.05; done
  cat "$LOG_DIR/dns.log" >&2; die "forestdns.py did not start within 10 s"
}
dns_down() {
  local pid
  [[ -f $ROOT/dns.pid ]] || return 0
  pid=$(tr -dc 0-9 <"$ROOT/dns.pid")
  if [[ -n $pid ]] && [[ $(cat "/proc/$pid/cmdline" 2>/dev/null | tr '\0' ' ') == *forestdns.py* ]]; then
    kill "$pid" 2>/dev/null || true
  fi
  rm -f "$ROOT/dns.pid"
}

# --------------------------------------------------------------------- samba ---

# krb5_conf N: Kerberos for DC N's tools and servers: both realms, their KDCs
# by address (no DNS lookups), DC N's realm the default.
krb5_conf() {
  cat >"$(dcdir "$1")/krb5.conf" <<EOF
[libdefaults]
  default_realm = $(realm_of "$1")
  dns_lookup_realm = false
  dns_lookup_kdc = false
[realms]
  $(realm_of 1) = {
    kdc = $(ip_of 1)
  }
  $(realm_of 2) = {
    kdc = $(ip_of 2)
  }
[domain_realm]
  .$(dns_of 1) = $(realm_of 1)
  $(dns_of 1) = $(realm_of 1)
  .$(dns_of 2) = $(realm_of 2)
  $(dns_of 2) = $(realm_of 2)
EOF
}

# provision N: domain N with its one DC. ncalrpc dir and winbindd socket
# directory inside the DC's directory: the defaults under /run/samba would be
# shared with every other Samba on the machine. allow_sasl_over_tls: an NTLM
# (SASL GSS-SPNEGO) bind over LDAPS needs no signing, as on AD; Samba 4.17's
# default (yes) answers it 8 "Sign or Seal are required".
provision() {
  local n=$1 d; d=$(dcdir "$n")
  mkdir -p "$d/log" "$d/secrets" "$d/winbindd" "$d/ncalrpc" "$d/run"
  chmod 700 "$d/secrets"
  ln -sfn ../tls "$d/tls"
  (umask 077; gen_password >"$d/secrets/admin.pw")
  krb5_conf "$n"
  if ! dc_exec "$n" samba-tool domain provision --targetdir="$d" --realm="$(realm_of "$n")" \
    --domain="$(netbios_of "$n")" --server-role=dc --dns-backend=SAMBA_INTERNAL \
    --host-name="$(host_of "$n")" --host-ip="$(ip_of "$n")" --adminpass="$(admin_pw "$n")" \
    --option="netbios name=$(host_of "$n" | tr 'a-z' 'A-Z')" --option="interfaces=$(ip_of "$n")" \
    --option="bind interfaces only=yes" --option="server services=$SERVICES" \
    --option="tls enabled=yes" --option="tls keyfile=$ROOT/tls/key$n.pem" \
    --option="tls certfile=$ROOT/tls/cert$n.pem" --option="tls cafile=$ROOT/tls/ca.pem" \
    --option="pid directory=$d/run" --option="log file=$d/log/samba.log" \
    --option="ncalrpc dir=$d/ncalrpc" --option="winbindd socket directory=$d/winbindd" \
    --option="dns forwarder=$NET.1" --option="ldap server require strong auth=allow_sasl_over_tls" \
    >"$d/log/provision.log" 2>&1; then
    tail -n 30 "$d/log/provision.log" >&2; die "$(realm_of "$n"): samba-tool domain provision failed"
  fi
  password_policy "$d" "$d/log/provision.log"
}

# trust: the two-way forest trust, made from CORP's DC on both sides
# (--create-location=both), then validated from both sides. Both sides use
# NTLM over SMB (--use-kerberos=off: no ticket cache here).
trust() {
  local out="$LOG_DIR/trust.log"
  if ! dc_exec 1 samba-tool domain trust create "$(realm_of 2)" -s "$(dcdir 1)/etc/smb.conf" \
    --type=forest --direction=both --create-location=both \
    --ipaddress="$(ip_of 2)" -U "$(netbios_of 2)\\Administrator" --password="$(admin_pw 2)" --use-kerberos=off \
    --local-dc-ipaddress="$(ip_of 1)" --local-dc-username="$(netbios_of 1)\\Administrator" \
    --local-dc-password="$(admin_pw 1)" --local-dc-use-kerberos=off >"$out" 2>&1; then
    tail -n 30 "$out" >&2; die "samba-tool domain trust create failed (log $out)"
  fi
  trust_validate
}
trust_validate() { # from CORP's side, checking both (--validate-location=both)
  local out="$LOG_DIR/trust-validate.log" i
  # winbindd may need a moment to set up its connection to the new trusted domain.
  for i in 1 2 3 4 5 6 7 8 9 10; do
    if dc_exec 1 samba-tool domain trust validate "$(realm_of 2)" -s "$(dcdir 1)/etc/smb.conf" \
      --validate-location=both \
      --ipaddress="$(ip_of 2)" -U "$(netbios_of 2)\\Administrator" --password="$(admin_pw 2)" --use-kerberos=off \
      --local-dc-ipaddress="$(ip_of 1)" --local-dc-username="$(netbios_of 1)\\Administrator" \
      --local-dc-password="$(admin_pw 1)" --local-dc-use-kerberos=off >>"$out" 2>&1; then
      return 0
    fi
    sleep 1
  done
  tail -n 30 "$out" >&2; die "samba-tool domain trust validate failed 10 times (log $out)"
}

# ------------------------------------------------------------------- seed ---

# seed N (in a subshell: domain N): the service account, and in
# OU=dirgate-forest two users with passwords and three groups, one of each
# scope: P-global (global: the users), P-universal (universal: P-global),
# P-local (domain local: P-universal; later also the other domain's principal).
seed() {
  local n=$1 p ou u; p=$(prefix_of "$n")
  domain "$n"
  create_service_account
  ou="$SEED_OU_RDN,$BASE_DN"
  local ldif="dn: $ou
changetype: add
objectClass: organizationalUnit

"
  for u in 1 2; do
    (umask 077; gen_password >"$DIR/secrets/$p-user$u.pw")
    ldif+="dn: CN=$p-user$u,$ou
changetype: add
objectClass: user
sAMAccountName: $p-user$u
userPrincipalName: $p-user$u@$(dns_of "$n")
userAccountControl: 66048
unicodePwd:: $(unicode_pwd "$(cat "$DIR/secrets/$p-user$u.pw")")

"
  done
  # groupType: global -2147483646, domain local -2147483644, universal -2147483640 (security groups).
  ldif+="dn: CN=$p-global,$ou
changetype: add
objectClass: group
groupType: -2147483646
member: CN=$p-user1,$ou
member: CN=$p-user2,$ou

dn: CN=$p-universal,$ou
changetype: add
objectClass: group
groupType: -2147483640
member: CN=$p-global,$ou

dn: CN=$p-local,$ou
changetype: add
objectClass: group
groupType: -2147483644
member: CN=$p-universal,$ou
"
  modify_ldif "$ldif" seed
}

# sid_of N DN: DN's objectSid on DC N, as S-1-5-21-…
sid_of() {
  local b64 hex s i sub
  b64=$(on "$1" ldapsearch -LLL -o ldif-wrap=no -s base -b "$2" objectSid | sed -n 's/^objectSid:: //p')
  [[ -n $b64 ]] || die "no objectSid on $2"
  hex=$(printf '%s' "$b64" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  s="S-$((16#${hex:0:2}))-$((16#${hex:4:12}))"
  for ((i = 0; i < 16#${hex:2:2}; i++)); do
    sub=${hex:16+8*i:8}
    s+="-$((16#${sub:6:2}${sub:4:2}${sub:2:2}${sub:0:2}))"
  done
  echo "$s"
}
seed_dn() { echo "CN=$(prefix_of "$1")-$2,$SEED_OU_RDN,$(base_of "$1")"; }

# foreign N DN: adds the other domain's principal DN (by its SID) to domain N's
# local group. Samba creates the foreign security principal
# CN=<SID>,CN=ForeignSecurityPrincipals,<domain N> and lists it as the member.
foreign() {
  local n=$1 sid; sid=$(sid_of "$((3 - n))" "$2")
  ( domain "$n"; modify_ldif "dn: $(seed_dn "$n" local)
changetype: modify
add: member
member: <SID=$sid>
-
" "foreign" )
  on "$n" ldapsearch -LLL -s base -b "CN=$sid,CN=ForeignSecurityPrincipals,$(base_of "$n")" dn >/dev/null \
    || die "$(realm_of "$n"): no foreign security principal CN=$sid after adding it to $(seed_dn "$n" local)"
  echo "CN=$sid,CN=ForeignSecurityPrincipals,$(base_of "$n")" >"$(dcdir "$n")/fsp.dn"
}

# --------------------------------------------------------------------- env ---

write_env() {
  local tmp="$STATE/env.tmp" n k d
  {
    echo "# Written by test/harness/samba/forest.sh start; source with: set -a; . $(q "$STATE/env"); set +a"
    echo "DIRGATE_TEST_FOREST_CA_FILE=$(q "$ROOT/tls/ca.pem")"
    echo "DIRGATE_TEST_FOREST_NAMESPACES=$(q "$(ns 1) $(ns 2)")"
    echo "DIRGATE_TEST_FOREST_DNS=$NET.1:53"
    echo "DIRGATE_TEST_FOREST_STATE_DIR=$(q "$STATE")"
    echo "DIRGATE_TEST_FOREST_SCRIPT=$(q "$SCRIPT_DIR/forest.sh")"
    for n in 1 2; do
      k=DIRGATE_TEST_FOREST_$(netbios_of "$n") d=$(dcdir "$n")
      domain "$n"
      echo "${k}_URL=$(url_of "$n")"
      echo "${k}_DC_NAME=$(dc_fqdn "$n")"
      echo "${k}_REALM=$REALM"
      echo "${k}_NETBIOS=$NETBIOS"
      echo "${k}_BASE_DN=$(q "$BASE_DN")"
      echo "${k}_SID=$(cat "$d/domain.sid")"
      echo "${k}_BIND_DN=$(q "$SVC_DN")"
      echo "${k}_PASSWORD_FILE=$(q "$d/secrets/svc.pw")"
      echo "${k}_ADMIN_DN=$(q "$ADMIN_DN")"
      echo "${k}_ADMIN_PASSWORD_FILE=$(q "$d/secrets/admin.pw")"
      echo "${k}_OU=$(q "$SEED_OU_RDN,$BASE_DN")"
      echo "${k}_USER_DN=$(q "$(seed_dn "$n" user1)")"
      echo "${k}_USER_NAME=$(prefix_of "$n")-user1"
      echo "${k}_USER_PASSWORD_FILE=$(q "$d/secrets/$(prefix_of "$n")-user1.pw")"
      echo "${k}_USER2_DN=$(q "$(seed_dn "$n" user2)")"
      echo "${k}_GLOBAL_DN=$(q "$(seed_dn "$n" global)")"
      echo "${k}_UNIVERSAL_DN=$(q "$(seed_dn "$n" universal)")"
      echo "${k}_LOCAL_DN=$(q "$(seed_dn "$n" local)")"
      echo "${k}_FSP_DN=$(q "$(cat "$d/fsp.dn")")"
    done
  } >"$tmp"
  mv "$tmp" "$STATE/env"
}

# ---------------------------------------------------------------- commands ---

cmd_stop() {
  local n
  if [[ -d $ROOT ]]; then
    for n in 1 2; do stop_dc "$n"; done
    dns_down
  fi
  net_down
  rm -rf -- "$ROOT"
  rm -f "$STATE/env" "$STATE/forest.conf"
  log "stopped"
}

cmd_start() {
  local t0 n; t0=$(now_ms)
  timed packages ensure_forest_tools
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
  load_conf
  check_free forest.conf "set DIRGATE_FOREST_NS_PREFIX and DIRGATE_FOREST_NET"
  cmd_stop
  local sock="$ROOT/dc1/private/ldap_priv/ldapi"
  ((${#sock} <= 107)) || die "STATE_DIR path too long for Samba's sockets ($sock): use a shorter one"
  printf 'NET=%s\nNS_PREFIX=%s\n' "$NET" "$NS_PREFIX" >"$STATE/forest.conf"
  mkdir -p "$LOG_DIR"
  trap 'rc=$?; if ((rc)); then stop_dc 1 KILL; stop_dc 2 KILL; dns_down; log "start failed; logs kept in $ROOT (forest.sh stop removes them)"; fi' EXIT
  ldap_env
  timed network net_up
  timed tls make_tls "$ROOT/tls" "dirgate forest test CA" "$LOG_DIR/tls.log"
  timed dns dns_up
  # Two provisions side by side: each is mostly single-threaded Python.
  bg provision-corp provision 1
  bg provision-fabrikam provision 2
  await provision-corp provision-fabrikam
  bg start-corp start_dc 1
  bg start-fabrikam start_dc 2
  await start-corp start-fabrikam
  bg seed-corp seed 1
  bg seed-fabrikam seed 2
  timed trust trust
  await seed-corp seed-fabrikam
  for n in 1 2; do sid_of "$n" "$(base_of "$n")" >"$(dcdir "$n")/domain.sid"; done
  timed foreign foreign_both
  write_env
  TIMINGS+=("total=$(since "$t0")ms")
  log "forest ready: $(realm_of 1) $(url_of 1), $(realm_of 2) $(url_of 2), env file $STATE/env"
  log "timings: ${TIMINGS[*]}"
}
# FABRIKAM's user1 in CORP's local group; CORP's global group in FABRIKAM's.
foreign_both() {
  foreign 1 "$(seed_dn 2 user1)"
  foreign 2 "$(seed_dn 1 global)"
}

cmd_status() {
  local n d pid rc=0
  [[ -d $ROOT ]] || { echo "no forest in $STATE"; return 3; }
  for n in 1 2; do
    d=$(dcdir "$n")
    if ! pid=$(pid_of "$d"); then echo "$(realm_of "$n"): not running"; rc=3; continue; fi
    if LDAPNETWORK_TIMEOUT=2 on "$n" ldapsearch -s base -b '' >/dev/null 2>&1; then
      echo "$(realm_of "$n"): pid $pid, $(url_of "$n") answers"
    else
      echo "$(realm_of "$n"): pid $pid, $(url_of "$n") does not answer a bind"; rc=3
    fi
  done
  if [[ -f $ROOT/dns.pid ]] && kill -0 "$(tr -dc 0-9 <"$ROOT/dns.pid")" 2>/dev/null; then
    echo "DNS forwarder: $NET.1:53"
  else
    echo "DNS forwarder: not running"; rc=3
  fi
  return "$rc"
}

usage() { echo "usage: $0 start|stop|status STATE_DIR, or $0 start|stop N STATE_DIR" >&2; exit 2; }

case $# in
  2) VERB=$1 N="" STATE=${2%/} ;;
  3) VERB=$1 N=$2 STATE=${3%/}; [[ $N == 1 || $N == 2 ]] && [[ $VERB == start || $VERB == stop ]] || usage ;;
  *) usage ;;
esac
[[ -n $STATE ]] || usage
if [[ -n $N ]]; then
  # One domain's DC: stopped gracefully (its database stays), started as at
  # cmd_start, in its own namespace.
  [[ -d $STATE ]] || die "no forest state in $STATE"
  STATE=$(cd "$STATE" && pwd)
  load_conf
  ldap_env
  export LDAPTLS_CACERT="$ROOT/tls/ca.pem"
  case $VERB in
    stop) stop_dc "$N" ;;
    start) start_dc "$N" ;;
  esac
  exit
fi
case $VERB in
  start) cmd_start ;;
  stop|status)
    [[ -d $STATE ]] || { [[ $VERB == stop ]] && exit 0; die "no forest state in $STATE"; }
    STATE=$(cd "$STATE" && pwd)
    load_conf
    ldap_env
    export LDAPTLS_CACERT="$ROOT/tls/ca.pem"
    "cmd_$VERB" ;;
  *) usage ;;
esac
