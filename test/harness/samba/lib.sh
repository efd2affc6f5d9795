# lib.sh: what test/harness/samba/dc.sh (one DC on loopback), test/harness/samba/pair.sh
# (two replicating DCs in network namespaces) and test/harness/samba/forest.sh (two
# domains joined by a forest trust) share: the domain's names and lockout
# policy, logging and timing, package installation, process checks, LDAP as
# Administrator, seeding, and the network, certificates and stopping of DCs in
# namespaces. Sourced, never run; the caller sets LOG_TAG, DIR (the directory
# holding secrets/, tls/ and log/) and LDAPS_URL.

# use_domain REALM NETBIOS BASE_DN sets the names of the domain the functions
# below work on (dc.sh and pair.sh: CORP, the default set here; forest.sh
# switches between its two domains).
use_domain() {
  REALM=$1 NETBIOS=$2 BASE_DN=$3
  ADMIN_DN="CN=Administrator,CN=Users,$BASE_DN"
  SVC_DN="CN=$SVC_NAME,CN=Users,$BASE_DN"
  # Account Operators is the smallest built-in group measured to let a bind
  # remove group members over LDAP (a plain user gets 50 insufficientAccessRights).
  SVC_GROUP_DN="CN=Account Operators,CN=Builtin,$BASE_DN"
}
readonly SVC_NAME=dirgate-svc
use_domain CORP.EXAMPLE.COM CORP 'DC=corp,DC=example,DC=com'
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

# password_policy TARGETDIR LOG: offline, on a provisioned DC's files: no
# complexity, length or age rules, and the lockout the README describes.
password_policy() {
  if ! samba-tool domain passwordsettings set -s "$1/etc/smb.conf" -H "tdb://$1/private/sam.ldb" \
    --complexity=off --min-pwd-length=1 --history-length=0 --min-pwd-age=0 \
    --account-lockout-threshold="$LOCKOUT_THRESHOLD" --account-lockout-duration="$LOCKOUT_MINUTES" \
    --reset-account-lockout-after="$LOCKOUT_MINUTES" >>"$2" 2>&1; then
    tail -n 30 "$2" >&2; die "samba-tool domain passwordsettings failed"
  fi
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

# ------------------------------------------------------ DCs in namespaces ---
# What pair.sh and forest.sh share: two DCs, each in a network namespace of its
# own on a bridge. The caller defines ns N, host_if N, ns_if N, ip_of N,
# mac_of N, in_ns N CMD..., dc_exec N CMD..., on N TOOL..., dc_fqdn N and
# dcdir N, and sets NET (three octets), BRIDGE, STATE (its STATE_DIR), LOG_DIR,
# START_TIMEOUT and OWNERS (a directory under /run naming, per namespace, the
# STATE_DIR that made it).

# net_down removes what net_up made; every step tolerates its absence, so it
# also clears what a killed run left behind.
net_down() {
  local n
  for n in 1 2; do
    ip netns del "$(ns "$n")" 2>/dev/null || true
    ip link del "$(host_if "$n")" 2>/dev/null || true
    rm -rf "/etc/netns/$(ns "$n")"
    rm -f "$OWNERS/$(ns "$n")"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

# net_up: a bridge with $NET.1/24 in this namespace, a veth from it into each
# DC's namespace. Every address has a permanent neighbour entry everywhere:
# with ARP resolved once and for all, a dropped link (pair.sh linkdown) makes
# packets vanish instead of failing fast with "no route to host" after ARP
# gives up. Each namespace's resolv.conf names its own DC's DNS, then the
# other's (ip netns exec mounts /etc/netns/NS/resolv.conf over /etc/resolv.conf).
net_up() {
  local n m
  ip link add "$BRIDGE" address "$(mac_of 1)" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for n in 1 2; do
    ip netns add "$(ns "$n")"
    ip link add "$(host_if "$n")" type veth peer name "$(ns_if "$n")" netns "$(ns "$n")"
    ip link set "$(host_if "$n")" master "$BRIDGE" up
    in_ns "$n" ip link set lo up
    in_ns "$n" ip link set "$(ns_if "$n")" address "$(mac_of "1$n")" up
    in_ns "$n" ip addr add "$(ip_of "$n")/24" dev "$(ns_if "$n")"
    ip neigh replace "$(ip_of "$n")" lladdr "$(mac_of "1$n")" dev "$BRIDGE" nud permanent
    in_ns "$n" ip neigh replace "$NET.1" lladdr "$(mac_of 1)" dev "$(ns_if "$n")" nud permanent
    m=$((3 - n))
    mkdir -p "/etc/netns/$(ns "$n")"
    mkdir -p "$OWNERS"
    echo "$STATE" >"$OWNERS/$(ns "$n")"
    printf 'nameserver %s\nnameserver %s\noptions timeout:1 attempts:1\n' "$(ip_of "$n")" "$(ip_of "$m")" \
      >"/etc/netns/$(ns "$n")/resolv.conf"
  done
  in_ns 1 ip neigh replace "$(ip_of 2)" lladdr "$(mac_of 12)" dev "$(ns_if 1)" nud permanent
  in_ns 2 ip neigh replace "$(ip_of 1)" lladdr "$(mac_of 11)" dev "$(ns_if 2)" nud permanent
}

# check_free CONF HINT refuses to take over namespaces or a subnet that
# another STATE_DIR still uses (start cleans up only its own leftovers). CONF
# is the file a running STATE_DIR holds (pair.conf), HINT how to choose others.
check_free() {
  local n owner
  for n in 1 2; do
    owner=$(cat "$OWNERS/$(ns "$n")" 2>/dev/null) || continue
    if [[ $owner != "$STATE" && -f $owner/$1 ]]; then
      die "namespace $(ns "$n") belongs to $owner: stop it first or $2"
    fi
  done
  if ip -4 -o addr show | grep -v " $BRIDGE " | grep -qF " inet $NET."; then
    die "$NET.0/24 is already in use on this machine: $2"
  fi
}

# make_tls TLS_DIR CA_NAME LOG: one CA, and for DC N (key$N.pem, cert$N.pem) a
# certificate for dc_fqdn N and its address, so a client verifies each DC
# against its own name or IP.
make_tls() {
  local d=$1 ca=$2 n
  mkdir -p "$d"
  (
    cd "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -out ca.pem -days 7 -subj "/O=dirgate test/CN=$ca" \
      -set_serial "0x1$(openssl rand -hex 15)" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    for n in 1 2; do
      openssl ecparam -name prime256v1 -genkey -noout -out "key$n.pem"
      openssl req -new -key "key$n.pem" -out "dc$n.csr" -subj "/O=dirgate test/CN=$(dc_fqdn "$n")"
      printf '%s\n' "subjectAltName=DNS:$(dc_fqdn "$n"),IP:$(ip_of "$n")" "basicConstraints=critical,CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"dc$n.ext"
      openssl x509 -req -in "dc$n.csr" -CA ca.pem -CAkey ca.key -days 7 -extfile "dc$n.ext" \
        -set_serial "0x1$(openssl rand -hex 15)" -out "cert$n.pem"
    done
    chmod 600 ca.key key1.pem key2.pem
  ) >"$3" 2>&1 || { cat "$3" >&2; die "creating certificates failed"; }
}

# start_dc N starts DC N's samba where dc_exec N runs it (its namespace) and
# waits until an Administrator bind over LDAPS answers (on N TOOL ARGS...
# runs an ldap-utils tool as Administrator against DC N; START_TIMEOUT).
start_dc() {
  local n=$1 d; d=$(dcdir "$n")
  if pid_of "$d" >/dev/null; then return 0; fi
  mkdir -p "$d/run" "$d/log"
  # A pid file left by a stopped or killed samba would read as "exited" below
  # until the new one overwrites it.
  rm -f "$d/run/samba.pid"
  dc_exec "$n" samba -s "$d/etc/smb.conf" -D </dev/null >>"$d/log/samba.log" 2>&1 \
    || { tail -n 30 "$d/log/samba.log" >&2; die "DC$n: samba did not start"; }
  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  until LDAPNETWORK_TIMEOUT=2 on "$n" ldapsearch -s base -b '' defaultNamingContext >"$d/log/wait.log" 2>&1; do
    if [[ -f $d/run/samba.pid ]] && ! pid_of "$d" >/dev/null; then
      tail -n 30 "$d/log/samba.log" >&2; die "DC$n: samba exited during start-up"
    fi
    if (( $(date +%s) >= deadline )); then
      tail -n 30 "$d/log/samba.log" >&2; die "DC$n: LDAPS did not answer within ${START_TIMEOUT}s"
    fi
    sleep 0.2
  done
}

# stop_dc N [KILL]: SIGTERM (SIGKILL of the process group with KILL, or when
# TERM is ignored for 10 s) and wait until the root process is gone.
stop_dc() {
  local n=$1 how=${2:-TERM} d pid; d=$(dcdir "$n")
  pid=$(pid_of "$d") || return 0
  if [[ $how == KILL ]]; then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  else
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && { kill -KILL -- "-$pid" 2>/dev/null || true; }
  fi
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done
  # Workers leave with the root; wait until none holds LDAPS, so a start can
  # bind the port again at once.
  for _ in $(seq 100); do pgrep -g "$pid" >/dev/null 2>&1 || break; sleep 0.05; done
}

declare -A BG=()
bg() { # bg LABEL CMD...: run CMD in the background, timed; await LABEL collects it
  local label=$1; shift
  ( t0=$(now_ms); "$@"; echo "$label=$(since "$t0")ms" >"$LOG_DIR/$label.time" ) &
  BG[$label]=$!
}
await() {
  local label
  for label; do
    wait "${BG[$label]}" || die "$label failed (logs in $LOG_DIR)"
    TIMINGS+=("$(cat "$LOG_DIR/$label.time")")
  done
}
