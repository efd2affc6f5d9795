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
# at a time. See test/harness/samba/README.md for the env contract and measured timings.
set -euo pipefail

readonly LOG_TAG=dc.sh
# shellcheck source=test/harness/samba/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
readonly LDAPS_URL=ldaps://127.0.0.1:636
readonly LDAP_URL=ldap://127.0.0.1:389
readonly PORTS=(389 636 3268 3269)
readonly START_TIMEOUT=${DIRGATE_SAMBA_START_TIMEOUT:-60}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
readonly SMOKE_DIR="$SCRIPT_DIR/testdata"
FIXTURE_DIR=$(realpath -m "${DIRGATE_SAMBA_FIXTURE_DIR:-$SCRIPT_DIR/../fixture/testdata}")
readonly FIXTURE_DIR



# The STATE_DIR/current file names the DC directory of the last start, so stop
# and status find it and a new start can clean up after an old one.
current_dir() { if [[ -f $STATE/current ]]; then cat "$STATE/current"; fi; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }


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
  password_policy "$DIR/dc" "$DIR/log/provision.log"
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


write_env() {
  local tmp="$STATE/env.tmp"
  {
    echo "# Written by test/harness/samba/dc.sh start; source with: set -a; . $(q "$STATE/env"); set +a"
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
