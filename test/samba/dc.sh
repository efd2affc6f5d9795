#!/usr/bin/env bash
# dc.sh provisions, starts, seeds, reports on and stops a throw-away Samba AD
# domain controller on loopback for dirgate's integration tests.
#
#   dc.sh start  STATE_DIR   provision a fresh DC under STATE_DIR, start it,
#                            seed it and write STATE_DIR/env
#   dc.sh stop   STATE_DIR   stop the DC and delete its files (safe to repeat)
#   dc.sh status STATE_DIR   say whether the DC answers (exit 0) or not (3)
#
# A DC uses the fixed ports 389, 636, 3268 and 3269, so one machine runs one DC
# at a time. See test/samba/README.md for the env contract and measured timings.
set -euo pipefail

readonly REALM=CORP.EXAMPLE.COM
readonly NETBIOS=CORP
readonly BASE_DN='DC=corp,DC=example,DC=com'
readonly ADMIN_DN="CN=Administrator,CN=Users,$BASE_DN"
readonly SVC_NAME=dirgate-svc
readonly SVC_DN="CN=$SVC_NAME,CN=Users,$BASE_DN"
# Account Operators is the smallest built-in group measured to let a bind
# remove group members over LDAP (a plain user gets 50 insufficientAccessRights).
readonly SVC_GROUP_DN="CN=Account Operators,CN=Builtin,$BASE_DN"
readonly LOCKOUT_THRESHOLD=3
readonly LOCKOUT_MINUTES=720
readonly LDAPS_URL=ldaps://127.0.0.1:636
readonly LDAP_URL=ldap://127.0.0.1:389
readonly PORTS=(389 636 3268 3269)
readonly START_TIMEOUT=${DIRGATE_SAMBA_START_TIMEOUT:-60}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
readonly SMOKE_DIR="$SCRIPT_DIR/testdata"
FIXTURE_DIR=$(realpath -m "${DIRGATE_SAMBA_FIXTURE_DIR:-$SCRIPT_DIR/../fixture/testdata}")
readonly FIXTURE_DIR

log() { printf '[dc.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
since() { echo "$(( $(now_ms) - $1 ))"; }
TIMINGS=()
timed() { # timed LABEL CMD...: run CMD and record how long it took
  local label=$1 t0; shift; t0=$(now_ms)
  "$@"
  TIMINGS+=("$label=$(since "$t0")ms")
}

# ---------------------------------------------------------------- packages ---

# ensure_packages installs what the harness needs when a command is missing,
# so a fresh machine (or CI) needs nothing installed by hand.
ensure_packages() {
  local missing=()
  for c in samba samba-tool ldapsearch ldapadd ldapmodify openssl jq iconv base64 od; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  # samba-tool provision needs the setup files of samba-ad-provision.
  [[ -d /usr/share/samba/setup ]] || missing+=(samba-ad-provision)
  ((${#missing[@]} == 0)) && return 0
  log "missing: ${missing[*]}; installing Debian packages"
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    die "cannot install (${missing[*]}): need root and apt-get; install samba samba-ad-dc samba-ad-provision ldap-utils jq openssl"
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2 || die "apt-get update failed"
  apt-get install -y -q samba samba-ad-dc samba-ad-provision ldap-utils jq openssl >&2 \
    || die "apt-get install of samba samba-ad-dc samba-ad-provision ldap-utils jq openssl failed"
  for c in "${missing[@]}"; do
    [[ $c == samba-ad-provision ]] || command -v "$c" >/dev/null 2>&1 || die "$c still missing after apt-get install"
  done
}

# --------------------------------------------------------------- state dir ---

# The STATE_DIR/current file names the DC directory of the last start, so stop
# and status find it and a new start can clean up after an old one.
current_dir() { if [[ -f $STATE/current ]]; then cat "$STATE/current"; fi; }
# alive PID: the process exists and is not a zombie (kill -0 succeeds on a
# zombie, and a daemon's zombie may wait a while for init to reap it).
alive() {
  local stat
  kill -0 "$1" 2>/dev/null && stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
pid_of() { # pid_of DIR: the samba root pid if it still runs
  local f="$1/run/samba.pid" pid
  [[ -f $f ]] || return 1
  pid=$(tr -dc 0-9 <"$f")
  [[ -n $pid ]] && alive "$pid" && echo "$pid"
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ------------------------------------------------------------------- LDAP ---

ldap_env() {
  export LDAPTLS_CACERT="$DIR/tls/ca.pem" LDAPTLS_REQCERT=demand
  # Ignore /etc/ldap/ldap.conf: the harness states every option it relies on.
  export LDAPCONF=/dev/null LDAPNETWORK_TIMEOUT=10
}
# as_admin TOOL ARGS...: run an ldap-utils tool bound as Administrator over LDAPS.
as_admin() {
  local tool=$1; shift
  "$tool" -H "$LDAPS_URL" -x -D "$ADMIN_DN" -y "$DIR/secrets/admin.pw" "$@"
}
b64() { printf '%s' "$1" | base64 -w0; }
unicode_pwd() { printf '"%s"' "$1" | iconv -f UTF-8 -t UTF-16LE | base64 -w0; }
# gen_password prints a random password meeting AD complexity (upper, lower,
# digit, symbol) with no trailing newline, as ldap-utils' -y reads it raw.
gen_password() { printf 'Dg7-%s' "$(openssl rand -hex 15)"; }
# modify_ldif LDIF_TEXT NAME: apply an LDIF as admin, keeping output in a log.
modify_ldif() {
  local out="$DIR/log/$2.log"
  if ! printf '%s' "$1" | as_admin ldapmodify >"$out" 2>&1; then
    tail -n 20 "$out" >&2; die "$2: ldapmodify failed (log $out)"
  fi
}

# ---------------------------------------------------------------------- TLS ---

# make_tls creates a CA and a server certificate with IP and DNS SANs and a
# positive serial: Samba's self-generated certificate has a negative serial
# (Go refuses it) and no SAN (hostname verification fails).
make_tls() {
  local d="$DIR/tls"
  mkdir -p "$d"
  (
    cd "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -out ca.pem -days 7 -subj "/O=dirgate test/CN=dirgate test CA" \
      -set_serial "0x1$(openssl rand -hex 15)" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl ecparam -name prime256v1 -genkey -noout -out key.pem
    openssl req -new -key key.pem -out server.csr -subj "/O=dirgate test/CN=localhost"
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -days 7 -extfile server.ext \
      -set_serial "0x1$(openssl rand -hex 15)" -out cert.pem
    # Samba refuses a private key readable by others.
    chmod 600 ca.key key.pem
  ) >"$DIR/log/tls.log" 2>&1 || { cat "$DIR/log/tls.log" >&2; die "creating certificates failed"; }
}

# ---------------------------------------------------------------- samba ---

provision() {
  local pw; pw=$(cat "$DIR/secrets/admin.pw")
  if ! samba-tool domain provision --targetdir="$DIR/dc" --realm="$REALM" --domain="$NETBIOS" \
    --server-role=dc --dns-backend=NONE --adminpass="$pw" \
    --option="interfaces=lo" --option="bind interfaces only=yes" \
    --option="server services=ldap" \
    --option="tls enabled=yes" --option="tls keyfile=$DIR/tls/key.pem" \
    --option="tls certfile=$DIR/tls/cert.pem" --option="tls cafile=$DIR/tls/ca.pem" \
    --option="pid directory=$DIR/run" --option="log file=$DIR/log/samba.log" \
    >"$DIR/log/provision.log" 2>&1; then
    tail -n 30 "$DIR/log/provision.log" >&2; die "samba-tool domain provision failed"
  fi
  # Offline (on the ldb files, before the server starts): fixture passwords
  # need not be complex, and wrong binds must lock for the rest of a run.
  if ! samba-tool domain passwordsettings set -s "$DIR/dc/etc/smb.conf" -H "tdb://$DIR/dc/private/sam.ldb" \
    --complexity=off --min-pwd-length=1 --history-length=0 --min-pwd-age=0 \
    --account-lockout-threshold="$LOCKOUT_THRESHOLD" --account-lockout-duration="$LOCKOUT_MINUTES" \
    --reset-account-lockout-after="$LOCKOUT_MINUTES" >>"$DIR/log/provision.log" 2>&1; then
    tail -n 30 "$DIR/log/provision.log" >&2; die "samba-tool domain passwordsettings failed"
  fi
}

fail_start() {
  log "samba log tail ($DIR/log/samba.log):"
  tail -n 40 "$DIR/log/samba.log" >&2 2>/dev/null || true
  die "$1"
}

start_samba() {
  samba -s "$DIR/dc/etc/smb.conf" -D </dev/null >>"$DIR/log/samba.log" 2>&1 \
    || fail_start "samba did not start"
  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  until LDAPNETWORK_TIMEOUT=2 as_admin ldapsearch -s base -b '' defaultNamingContext >"$DIR/log/wait.log" 2>&1; do
    if [[ -f $DIR/run/samba.pid ]] && ! pid_of "$DIR" >/dev/null; then
      fail_start "samba exited during start-up"
    fi
    if (( $(date +%s) >= deadline )); then
      log "last bind attempt: $(tr '\n' ' ' <"$DIR/log/wait.log")"
      fail_start "LDAPS on $LDAPS_URL did not accept a bind within ${START_TIMEOUT}s"
    fi
    sleep 0.2
  done
}

# create_service_account adds dirgate's bind account with a random password
# that never expires, and puts it in Account Operators (see README).
create_service_account() {
  (umask 077; gen_password >"$DIR/secrets/svc.pw")
  modify_ldif "dn: $SVC_DN
changetype: add
objectClass: user
sAMAccountName: $SVC_NAME
description: dirgate service account (test)
userAccountControl: 66048
unicodePwd:: $(unicode_pwd "$(cat "$DIR/secrets/svc.pw")")

dn: $SVC_GROUP_DN
changetype: modify
add: member
member: $SVC_DN
" service-account
}

# ------------------------------------------------------------------- seed ---

seed_ldif() { # seed_ldif TOOL FILE NAME
  local out="$DIR/log/$3.log"
  if ! as_admin "$1" -f "$2" >"$out" 2>&1; then
    tail -n 20 "$out" >&2; die "$3: $1 -f $2 failed (log $out)"
  fi
}

# rid_of DN prints the RID (last sub-authority of objectSid, little-endian).
rid_of() {
  local sid
  sid=$(as_admin ldapsearch -LLL -o ldif-wrap=no -s base -b "$1" objectSid | sed -n 's/^objectSid:: //p')
  [[ -n $sid ]] || die "primaryGroup: no objectSid on $1"
  printf '%s' "$sid" | base64 -d | tail -c 4 | od -An -tu4 --endian=little | tr -d ' '
}

# apply_post FILE applies a samba-post.json: passwords, lockouts, must-change
# flags and primary groups, none of which an LDIF add can express.
apply_post() {
  local f=$1 name=$2 extra dn dn64 pw64 m64 g64 group rid ldif="" uac
  # Check the whole shape first: the loops below read jq through process
  # substitution, where a jq error would go unnoticed and skip a step.
  extra=$(jq -r 'def strs($o; $ks): ($o | type) == "object" and all($ks[]; ($o[.] | type) == "string");
    if type != "object" then "not a JSON object"
    elif (keys - ["passwords","lock","mustChange","primaryGroup"]) != [] then
      "unknown keys: " + ((keys - ["passwords","lock","mustChange","primaryGroup"]) | join(","))
    elif all((.passwords // []), (.lock // []); type == "array" and all(.[]; strs(.; ["dn","password"]))) | not then
      "passwords/lock must be arrays of {\"dn\",\"password\"} strings"
    elif ((.mustChange // []) | type == "array" and all(.[]; type == "string")) | not then
      "mustChange must be an array of DN strings"
    elif ((.primaryGroup // []) | type == "array" and all(.[]; strs(.; ["member","group"]))) | not then
      "primaryGroup must be an array of {\"member\",\"group\"} strings"
    else "" end' "$f") || die "$name: $f is not valid JSON"
  [[ -z $extra ]] || die "$name: $f: $extra"

  # jq emits base64 fields so DNs with spaces, backslashes or non-ASCII
  # letters reach LDIF (dn::) and argv untouched.
  while read -r dn64 pw64; do
    ldif+="dn:: $dn64
changetype: modify
replace: unicodePwd
unicodePwd:: $(unicode_pwd "$(base64 -d <<<"$pw64")")
-

"
  done < <(jq -r '(.passwords // []) + (.lock // []) | .[] | "\(.dn|@base64) \(.password|@base64)"' "$f")
  while read -r dn64; do
    ldif+="dn:: $dn64
changetype: modify
replace: pwdLastSet
pwdLastSet: 0
-

"
  done < <(jq -r '.mustChange // [] | .[] | @base64' "$f")
  [[ -z $ldif ]] || modify_ldif "$ldif" "$name-passwords"

  while read -r m64 g64; do
    group=$(base64 -d <<<"$g64")
    rid=$(rid_of "$group")
    # Samba refuses a primaryGroupID the user is not a member of; 20/68 mean
    # the fixture already listed the membership.
    printf 'dn:: %s\nchangetype: modify\nadd: member\nmember:: %s\n' "$g64" "$m64" \
      | as_admin ldapmodify >>"$DIR/log/$name-primary.log" 2>&1 || case $? in 20|68) ;; *)
        tail -n 5 "$DIR/log/$name-primary.log" >&2; die "$name: adding member for primaryGroup of $group failed";; esac
    modify_ldif "dn:: $m64
changetype: modify
replace: primaryGroupID
primaryGroupID: $rid
-
" "$name-primary-set"
  done < <(jq -r '.primaryGroup // [] | .[] | "\(.member|@base64) \(.group|@base64)"' "$f")

  # Lock last: threshold+1 wrong binds; a locked account must show 0x10 in
  # msDS-User-Account-Control-Computed, or the fixture is not what it claims.
  while read -r dn64; do
    dn=$(base64 -d <<<"$dn64")
    for _ in $(seq $((LOCKOUT_THRESHOLD + 1))); do
      ldapsearch -H "$LDAPS_URL" -x -D "$dn" -w "dirgate-wrong-password" \
        -s base -b '' >/dev/null 2>&1 || true
    done
    uac=$(as_admin ldapsearch -LLL -o ldif-wrap=no -s base -b "$dn" msDS-User-Account-Control-Computed \
      | sed -n 's/^msDS-User-Account-Control-Computed: //p')
    (( (${uac:-0} & 16) != 0 )) || die "$name: $dn is not locked after $((LOCKOUT_THRESHOLD + 1)) wrong binds (computed UAC ${uac:-none})"
  done < <(jq -r '.lock // [] | .[] | .dn | @base64' "$f")
}

SEEDED_FIXTURE=""
seed_fixture() {
  local seed="$FIXTURE_DIR/samba-seed.ldif" mod="$FIXTURE_DIR/samba-modify.ldif" post="$FIXTURE_DIR/samba-post.json"
  if [[ ! -f $seed ]]; then
    log "warning: $seed not found: project fixture NOT seeded (smoke objects only)"
    return 0
  fi
  timed seed-fixture seed_ldif ldapadd "$seed" fixture-seed
  if [[ -f $mod ]]; then timed modify-fixture seed_ldif ldapmodify "$mod" fixture-modify
  else log "warning: $mod not found: skipped"; fi
  if [[ -f $post ]]; then timed post-fixture apply_post "$post" fixture-post
  else log "warning: $post not found: skipped"; fi
  SEEDED_FIXTURE=$FIXTURE_DIR
}

# --------------------------------------------------------------- commands ---

q() { # q VALUE: shell-quote only when needed, so simple lines stay KEY=VALUE
  if [[ $1 =~ ^[A-Za-z0-9_./:,=@+-]*$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

write_env() {
  local tmp="$STATE/env.tmp"
  {
    echo "# Written by test/samba/dc.sh start; source with: set -a; . $(q "$STATE/env"); set +a"
    echo "DIRGATE_TEST_LDAP_URL=$LDAPS_URL"
    echo "DIRGATE_TEST_LDAP_STARTTLS_URL=$LDAP_URL"
    echo "DIRGATE_TEST_LDAP_BASE_DN=$(q "$BASE_DN")"
    echo "DIRGATE_TEST_LDAP_BIND_DN=$(q "$SVC_DN")"
    echo "DIRGATE_TEST_LDAP_PASSWORD_FILE=$(q "$DIR/secrets/svc.pw")"
    echo "DIRGATE_TEST_LDAP_ADMIN_DN=$(q "$ADMIN_DN")"
    echo "DIRGATE_TEST_LDAP_ADMIN_PASSWORD_FILE=$(q "$DIR/secrets/admin.pw")"
    echo "DIRGATE_TEST_LDAP_CA_FILE=$(q "$DIR/tls/ca.pem")"
    echo "DIRGATE_TEST_LDAP_FIXTURE_DIR=$(q "$SEEDED_FIXTURE")"
    echo "DIRGATE_TEST_SAMBA_DIR=$(q "$DIR")"
  } >"$tmp"
  mv "$tmp" "$STATE/env"
}

cmd_stop() {
  local dir pid
  dir=$(current_dir)
  if [[ -z $dir ]]; then log "no DC recorded in $STATE"; rm -f "$STATE/env"; return 0; fi
  if pid=$(pid_of "$dir"); then
    log "stopping samba (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      log "samba ignored SIGTERM for 10s: killing its process group"
      # samba -D calls setsid, so its workers share the root's process group.
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    # The workers close the listening sockets just after the root exits; a
    # start right after this stop must find the ports free.
    for _ in $(seq 100); do
      local p busy=0
      for p in "${PORTS[@]}"; do port_busy "$p" && busy=1; done
      ((busy)) || break
      sleep 0.1
    done
  fi
  # Only remove what start created: a dc.* directory inside STATE_DIR.
  case $dir in "$STATE"/dc.*) rm -rf -- "$dir" ;; *) log "warning: not removing unexpected dir $dir" ;; esac
  rm -f "$STATE/current" "$STATE/env"
  log "stopped"
}

cmd_status() {
  local dir pid
  dir=$(current_dir)
  [[ -n $dir && -d $dir ]] || { echo "no DC in $STATE"; return 3; }
  pid=$(pid_of "$dir") || { echo "DC in $dir is not running"; return 3; }
  DIR=$dir; ldap_env
  if LDAPNETWORK_TIMEOUT=2 as_admin ldapsearch -s base -b '' >/dev/null 2>&1; then
    echo "DC running: pid $pid, dir $dir, $LDAPS_URL answers; env: $STATE/env"
  else
    echo "DC process $pid runs but $LDAPS_URL does not answer a bind"; return 3
  fi
}

cmd_start() {
  local t0; t0=$(now_ms)
  timed packages ensure_packages
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
  cmd_stop
  local p busy=()
  for p in "${PORTS[@]}"; do port_busy "$p" && busy+=("$p"); done
  if ((${#busy[@]})); then
    pgrep -a samba >&2 || true
    die "port(s) ${busy[*]} on 127.0.0.1 already in use (another Samba DC?): stop it with 'dc.sh stop <its STATE_DIR>' first"
  fi

  DIR=$(mktemp -d "$STATE/dc.XXXXXX")
  # Samba's unix sockets (e.g. dc/private/ldap_priv/ldapi) must fit sun_path.
  local sock="$DIR/dc/private/ldap_priv/ldapi"
  if ((${#sock} > 107)); then
    rmdir "$DIR"; die "STATE_DIR path too long for Samba's sockets ($sock): use a shorter one, e.g. /tmp/dgs"
  fi
  echo "$DIR" >"$STATE/current"
  mkdir -p "$DIR/log" "$DIR/run" "$DIR/secrets"
  chmod 700 "$DIR/secrets"
  # If anything below fails, stop the half-started DC but keep its logs.
  trap 'rc=$?; if ((rc)); then pid=$(pid_of "$DIR") && kill -TERM "$pid" 2>/dev/null; log "start failed; logs kept in $DIR/log (dc.sh stop removes them)"; fi' EXIT
  (umask 077; gen_password >"$DIR/secrets/admin.pw")
  ldap_env

  timed tls make_tls
  timed provision provision
  timed start start_samba
  timed service-account create_service_account
  timed seed-smoke seed_ldif ldapadd "$SMOKE_DIR/smoke.ldif" smoke-seed
  timed post-smoke apply_post "$SMOKE_DIR/smoke-post.json" smoke-post
  seed_fixture
  write_env
  TIMINGS+=("total=$(since "$t0")ms")
  log "DC ready: $LDAPS_URL (pid $(pid_of "$DIR")), env file $STATE/env"
  log "timings: ${TIMINGS[*]}"
}

usage() { echo "usage: $0 start|stop|status STATE_DIR" >&2; exit 2; }
(($# == 2)) || usage
STATE=${2%/}
[[ -n $STATE ]] || usage
case $1 in
  start) cmd_start ;;
  stop) [[ -d $STATE ]] && STATE=$(cd "$STATE" && pwd); cmd_stop ;;
  status) [[ -d $STATE ]] && STATE=$(cd "$STATE" && pwd); cmd_status ;;
  *) usage ;;
esac
