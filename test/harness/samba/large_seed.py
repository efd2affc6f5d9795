"""large_seed.py: seeds a Samba AD DC's sam.ldb directly (no LDAP) with N users
and one group per size holding the first `size` of them, for test/harness/samba/large.sh.

    /usr/bin/python3 large_seed.py SMB_CONF SAM_LDB BASE_DN MAX_USERS SIZES [BATCH]

Users are added in transactions of BATCH (default 2,000), member values in
modifies of BATCH, through Samba's own Python bindings and modules (samldb allocates the SIDs, the
linked-attribute module keeps memberOf and the sorted member list), as system:
an LDAP add commits one transaction per entry, and a modify that adds one member
rewrites the group's whole member list, which is what made seeding over LDAPS
slow (test/harness/samba/README.md, "A large group"). Idempotent: entries already there
are skipped, members already in a group are not added again.
"""

import sys
import time

import ldb
from samba.auth import system_session
from samba.param import LoadParm
from samba.samdb import SamDB


def log(msg):
    print("[large_seed] " + msg, file=sys.stderr, flush=True)


def user_dn(i, ou):
    return "CN=Large User %06d,%s" % (i, ou)


def group_dn(size, ou):
    return "CN=dirgate-large-%d,%s" % (size, ou)


def exists(db, dn):
    try:
        return len(db.search(base=dn, scope=ldb.SCOPE_BASE, attrs=["objectGUID"])) == 1
    except ldb.LdbError as e:
        if e.args[0] == ldb.ERR_NO_SUCH_OBJECT:
            return False
        raise


def main():
    if len(sys.argv) not in (6, 7):
        log("usage: large_seed.py SMB_CONF SAM_LDB BASE_DN MAX_USERS SIZES [BATCH]")
        return 2
    conf, url, base, users, sizes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sorted(int(s) for s in sys.argv[5].split(","))
    batch = int(sys.argv[6]) if len(sys.argv) == 7 else 2000
    if sizes[-1] > users:
        log("a size (%d) is larger than the users (%d)" % (sizes[-1], users))
        return 2
    lp = LoadParm()
    lp.load(conf)
    # batch_mode: no sub-transaction per operation (a failure aborts the whole
    # transaction instead). Without it each add copies the domain's large index
    # lists (objectClass=user, the parent's one-level index, ...) and the adds slow
    # down as the users grow (2,000 took 47 s, the next 2,000 175 s); samba-tool's
    # join and provision use it for the same reason.
    db = SamDB(url=url, session_info=system_session(), lp=lp, options=["batch_mode:1"])
    ou = "OU=dirgate-large," + base
    if not exists(db, ou):
        db.add({"dn": ou, "objectClass": "organizationalUnit"})

    t0 = time.time()
    have = {str(m.dn).lower() for m in db.search(base=ou, scope=ldb.SCOPE_ONELEVEL, expression="(objectClass=user)", attrs=["cn"])}
    todo = [i for i in range(1, users + 1) if user_dn(i, ou).lower() not in have]
    for start in range(0, len(todo), batch):
        db.transaction_start()
        try:
            for i in todo[start:start + batch]:
                db.add({
                    "dn": user_dn(i, ou),
                    "objectClass": "user",
                    "sAMAccountName": "large%06d" % i,
                    "givenName": "Large",
                    "sn": "User %06d" % i,
                    "displayName": "Large User %06d" % i,
                    "mail": "large%06d@corp.example.com" % i,
                })
        except Exception:
            db.transaction_cancel()
            raise
        db.transaction_commit()
        log("users: %d of %d added (%.1f s)" % (min(start + batch, len(todo)), len(todo), time.time() - t0))
    log("users: %d added, %d already there, %.1f s" % (len(todo), users - len(todo), time.time() - t0))

    for size in sizes:
        t1 = time.time()
        g = group_dn(size, ou)
        if not exists(db, g):
            db.add({"dn": g, "objectClass": "group", "sAMAccountName": "dirgate-large-%d" % size,
                    "description": "dirgate large group: %d members (test/harness/samba/large.sh)" % size})
        res = db.search(base=g, scope=ldb.SCOPE_BASE, attrs=["member"])
        present = {str(v).lower() for v in res[0].get("member", [])}
        want = [user_dn(i, ou) for i in range(1, size + 1) if user_dn(i, ou).lower() not in present]
        for start in range(0, len(want), batch):
            m = ldb.Message()
            m.dn = ldb.Dn(db, g)
            m["member"] = ldb.MessageElement(want[start:start + batch], ldb.FLAG_MOD_ADD, "member")
            db.modify(m)
        log("group of %d: %d members added, %.1f s" % (size, len(want), time.time() - t1))
    log("total %.1f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
