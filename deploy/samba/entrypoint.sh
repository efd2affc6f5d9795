#!/usr/bin/env bash
# entrypoint.sh runs the throw-away Samba AD domain controller of deploy/compose.yaml.
#
#   entrypoint.sh          provision on first start, start samba, seed, stay in the foreground
#   entrypoint.sh health   exit 0 once the DC is seeded and answers an LDAPS bind
#
# It follows test/harness/samba/dc.sh (the test harness): the same realm, NetBIOS name, base
# DN, service account, password and lockout settings, its own CA (Samba's generated
# certificate has a negative serial that Go refuses, and no SAN), and the same
# fixture files and post-file semantics. Unlike dc.sh it listens on every interface,
# names the compose service in the certificate, runs samba in the foreground, and
# keeps its state in the container so that a restart skips provisioning.
# deploy/deploy_test.go checks that the shared settings stay equal to dc.sh's.
set -euo pipefail

readonly REALM=CORP.EXAMPLE.COM
readonly NETBIOS=CORP
readonly BASE_DN='DC=corp,DC=example,DC=com'
readonly ADMIN_DN="CN=Administrator,CN=Users,$BASE_DN"
readonly SVC_NAME=dirgate-svc
readonly SVC_DN="CN=$SVC_NAME,CN=Users,$BASE_DN"
readonly SVC_GROUP_DN="CN=Account Operators,CN=Builtin,$BASE_DN"
readonly LOCKOUT_THRESHOLD=3
readonly LOCKOUT_MINUTES=720

# Paths and names the compose file may change.
readonly STATE=${DC_STATE_DIR:-/var/lib/dirgate-dc}       # provisioned domain, private
readonly SHARED=${DC_SHARED_DIR:-/run/dirgate-dc}         # ca.pem and svc.pw for dirgate
readonly FIXTURE=${DC_FIXTURE_DIR:-/fixture}              # test/harness/fixture/testdata
readonly TLS_DNS_NAMES=${DC_TLS_DNS_NAMES:-samba,localhost} # names dirgate dials
readonly READER_UID=${DC_READER_UID:-65532}               # dirgate's user, owns svc.pw
readonly START_TIMEOUT=${DC_START_TIMEOUT:-120}
# An IP, as in dc.sh: libldap checks a certificate for "localhost" against the
# machine's host name instead.
readonly LDAPS_URL=ldaps://127.0.0.1:636

log() { printf '[samba-dc] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ldap_env() {
  export LDAPTLS_CACERT="$STATE/tls/ca.pem" LDAPTLS_REQCERT=demand
  export LDAPCONF=/dev/null LDAPNETWORK_TIMEOUT=10
}
as_admin() {
  local tool=$1; shift
  "$tool" -H "$LDAPS_URL" -x -D "$ADMIN_DN" -y "$STATE/secrets/admin.pw" "$@"
}
unicode_pwd() { printf '"%s"' "$1" | iconv -f UTF-8 -t UTF-16LE | base64 -w0; }
gen_password() { printf 'Dg7-%s' "$(openssl rand -hex 15)"; }
# modify LDIF_TEXT NAME: apply an LDIF as Administrator, showing the output on failure.
modify() {
  local out
  out=$(printf '%s' "$1" | as_admin ldapmodify 2>&1) || { printf '%s\n' "$out" | tail -n 20 >&2; die "$2: ldapmodify failed"; }
}

# make_tls creates the CA and a server certificate for every name in TLS_DNS_NAMES
# and 127.0.0.1, with positive serials (dc.sh's make_tls, other SANs).
make_tls() {
  local d="$STATE/tls" san="IP:127.0.0.1" n names
  IFS=, read -ra names <<<"$TLS_DNS_NAMES"
  for n in "${names[@]}"; do san+=",DNS:$n"; done
  mkdir -p "$d"
  (
    cd "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/O=dirgate compose/CN=dirgate compose CA" \
      -set_serial "0x1$(openssl rand -hex 15)" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl ecparam -name prime256v1 -genkey -noout -out key.pem
    openssl req -new -key key.pem -out server.csr -subj "/O=dirgate compose/CN=${names[0]}"
    printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -days 30 -extfile server.ext \
      -set_serial "0x1$(openssl rand -hex 15)" -out cert.pem
    chmod 600 ca.key key.pem
  ) >"$STATE/tls.log" 2>&1 || { cat "$STATE/tls.log" >&2; die "creating certificates failed"; }
}

# provision: dc.sh's options, without interfaces=lo (other containers connect).
provision() {
  local out
  out=$(samba-tool domain provision --targetdir="$STATE/dc" --realm="$REALM" --domain="$NETBIOS" \
    --server-role=dc --dns-backend=NONE --adminpass="$(cat "$STATE/secrets/admin.pw")" \
    --option="server services=ldap" \
    --option="tls enabled=yes" --option="tls keyfile=$STATE/tls/key.pem" \
    --option="tls certfile=$STATE/tls/cert.pem" --option="tls cafile=$STATE/tls/ca.pem" \
    --option="pid directory=$STATE/run" \
    --option="vfs objects=dfs_samba4 acl_xattr xattr_tdb" --option="xattr_tdb:file=$STATE/dc/xattr.tdb" 2>&1) || { printf '%s\n' "$out" | tail -n 30 >&2; die "samba-tool domain provision failed"; }
  out=$(samba-tool domain passwordsettings set -s "$STATE/dc/etc/smb.conf" -H "tdb://$STATE/dc/private/sam.ldb" \
    --complexity=off --min-pwd-length=1 --history-length=0 --min-pwd-age=0 \
    --account-lockout-threshold="$LOCKOUT_THRESHOLD" --account-lockout-duration="$LOCKOUT_MINUTES" \
    --reset-account-lockout-after="$LOCKOUT_MINUTES" 2>&1) || { printf '%s\n' "$out" | tail -n 30 >&2; die "samba-tool domain passwordsettings failed"; }
}

wait_ldaps() {
  local deadline=$(( $(date +%s) + START_TIMEOUT )) err=""
  until err=$(LDAPNETWORK_TIMEOUT=2 as_admin ldapsearch -s base -b '' defaultNamingContext 2>&1 >/dev/null); do
    kill -0 "$SAMBA_PID" 2>/dev/null || die "samba exited during start-up"
    (( $(date +%s) < deadline )) || die "LDAPS did not accept a bind within ${START_TIMEOUT}s: $err"
    sleep 0.5
  done
}

create_service_account() {
  (umask 077; gen_password >"$STATE/secrets/svc.pw")
  modify "dn: $SVC_DN
changetype: add
objectClass: user
sAMAccountName: $SVC_NAME
description: dirgate service account (compose)
userAccountControl: 66048
unicodePwd:: $(unicode_pwd "$(cat "$STATE/secrets/svc.pw")")

dn: $SVC_GROUP_DN
changetype: modify
add: member
member: $SVC_DN
" service-account
}

# rid_of DN prints the RID (last sub-authority of objectSid, little-endian).
rid_of() {
  local sid
  sid=$(as_admin ldapsearch -LLL -o ldif-wrap=no -s base -b "$1" objectSid | sed -n 's/^objectSid:: //p')
  [[ -n $sid ]] || die "primaryGroup: no objectSid on $1"
  printf '%s' "$sid" | base64 -d | tail -c 4 | od -An -tu4 --endian=little | tr -d ' '
}

# apply_post FILE applies samba-post.json as dc.sh does: passwords, must-change
# flags, primary groups, then lockouts (test/harness/samba/README.md, "The post file").
apply_post() {
  local f=$1 dn dn64 pw64 m64 g64 rid ldif="" uac
  jq -e 'type == "object" and ((keys - ["passwords","lock","mustChange","primaryGroup"]) == [])' "$f" >/dev/null \
    || die "$f: not a post file (unknown keys or not an object)"
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
  [[ -z $ldif ]] || modify "$ldif" post-passwords

  while read -r m64 g64; do
    rid=$(rid_of "$(base64 -d <<<"$g64")")
    # Already a member (20, 68) is fine: Samba wants membership before primaryGroupID.
    printf 'dn:: %s\nchangetype: modify\nadd: member\nmember:: %s\n' "$g64" "$m64" \
      | as_admin ldapmodify >/dev/null 2>&1 || case $? in 20|68) ;; *) die "post: adding member for a primary group failed";; esac
    modify "dn:: $m64
changetype: modify
replace: primaryGroupID
primaryGroupID: $rid
-
" post-primary-group
  done < <(jq -r '.primaryGroup // [] | .[] | "\(.member|@base64) \(.group|@base64)"' "$f")

  while read -r dn64; do
    dn=$(base64 -d <<<"$dn64")
    for _ in $(seq $((LOCKOUT_THRESHOLD + 1))); do
      ldapsearch -H "$LDAPS_URL" -x -D "$dn" -w "dirgate-wrong-password" -s base -b '' >/dev/null 2>&1 || true
    done
    uac=$(as_admin ldapsearch -LLL -o ldif-wrap=no -s base -b "$dn" msDS-User-Account-Control-Computed \
      | sed -n 's/^msDS-User-Account-Control-Computed: //p')
    (( (${uac:-0} & 16) != 0 )) || die "post: $dn is not locked after $((LOCKOUT_THRESHOLD + 1)) wrong binds"
  done < <(jq -r '.lock // [] | .[] | .dn | @base64' "$f")
}

seed() {
  local out
  if [[ ! -f $FIXTURE/samba-seed.ldif ]]; then
    log "warning: $FIXTURE/samba-seed.ldif not found: the directory holds only the built-in objects"
    return 0
  fi
  log "seeding $FIXTURE/samba-seed.ldif (about a minute for the large fixture)"
  out=$(as_admin ldapadd -f "$FIXTURE/samba-seed.ldif" 2>&1) || { printf '%s\n' "$out" | tail -n 20 >&2; die "ldapadd samba-seed.ldif failed"; }
  if [[ -f $FIXTURE/samba-modify.ldif ]]; then
    out=$(as_admin ldapmodify -f "$FIXTURE/samba-modify.ldif" 2>&1) || { printf '%s\n' "$out" | tail -n 20 >&2; die "ldapmodify samba-modify.ldif failed"; }
  fi
  if [[ -f $FIXTURE/samba-post.json ]]; then apply_post "$FIXTURE/samba-post.json"; fi
}

# publish copies what dirgate needs into the shared volume, readable by its user only.
publish() {
  mkdir -p "$SHARED"
  install -m 0444 "$STATE/tls/ca.pem" "$SHARED/ca.pem"
  install -m 0400 -o "$READER_UID" -g "$READER_UID" "$STATE/secrets/svc.pw" "$SHARED/svc.pw"
}

health() {
  [[ -f $STATE/ready ]] || exit 1
  ldap_env
  LDAPNETWORK_TIMEOUT=2 as_admin ldapsearch -s base -b '' defaultNamingContext >/dev/null 2>&1
}

main() {
  mkdir -p "$STATE/secrets" "$STATE/run"
  chmod 700 "$STATE/secrets"
  ldap_env
  if [[ ! -f $STATE/provisioned ]]; then
    log "provisioning $REALM"
    rm -rf "${STATE:?}/dc" "$STATE/tls"
    (umask 077; gen_password >"$STATE/secrets/admin.pw")
    make_tls
    provision
    touch "$STATE/provisioned"
  fi
  rm -f "$STATE"/run/*.pid
  samba -s "$STATE/dc/etc/smb.conf" --foreground --no-process-group --debug-stdout </dev/null &
  SAMBA_PID=$!
  STOPPING=0
  trap 'STOPPING=1; kill -TERM "$SAMBA_PID" 2>/dev/null' TERM INT
  wait_ldaps
  if [[ ! -f $STATE/ready ]]; then
    create_service_account
    seed
    touch "$STATE/ready"
  fi
  publish
  log "DC ready: ldaps://${TLS_DNS_NAMES%%,*}:636, base $BASE_DN, bind $SVC_DN"
  # A trapped signal interrupts wait; keep waiting until samba itself has exited.
  local rc=0
  wait "$SAMBA_PID" || rc=$?
  while kill -0 "$SAMBA_PID" 2>/dev/null; do wait "$SAMBA_PID" || rc=$?; done
  # A requested stop is a clean exit; samba ending by itself is not.
  if ((STOPPING)); then exit 0; fi
  log "samba exited (status $rc)"
  exit $((rc == 0 ? 1 : rc))
}

case ${1:-run} in
  run) main ;;
  health) health ;;
  *) echo "usage: $0 [run|health]" >&2; exit 2 ;;
esac
