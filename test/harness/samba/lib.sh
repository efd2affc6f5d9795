# lib.sh: what test/harness/samba/dc.sh (one DC on loopback) and test/harness/samba/pair.sh
# (two replicating DCs in network namespaces) share: the domain's names and
# lockout policy, logging and timing, package installation, process checks,
# LDAP as Administrator, and seeding. Sourced, never run; the caller sets
# LOG_TAG, DIR (the directory holding secrets/, tls/ and log/) and LDAPS_URL.

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

log() { printf '[%s] %s\n' "${LOG_TAG:-samba}" "$*" >&2; }
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

q() { # q VALUE: shell-quote only when needed, so simple lines stay KEY=VALUE
  if [[ $1 =~ ^[A-Za-z0-9_./:,=@+-]*$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
