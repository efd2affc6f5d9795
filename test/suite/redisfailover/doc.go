// Package redisfailover holds dirgate's end-to-end Redis failover tests: two dirgate
// instances, run as child processes (test/harness/child) in front of the harness
// Samba DC, share a Redis deployment of real processes (test/harness/redistest), and
// the tests make its primary fail over while clients list groups, change memberships
// and revoke tokens.
//
//   - TestSentinelFailoverUnderLoad, TestClusterFailoverUnderLoad: the primary (in
//     a Cluster, the one owning the lease hash's slot) is killed under a load of
//     listings, direct and nested, on both instances, with a tokens-file token, and
//     a replica is promoted. No request fails, every listing is the directory's,
//     the cache is used again afterwards, and both instances count and log the
//     history change.
//   - TestLostRemoval, TestLostAddition: the lost write made deterministic with
//     Sentinel. The replica is paused (SIGSTOP) and the primary filled with 40 MiB,
//     more than the kernel buffers towards the replica, so that what follows stays
//     in the primary's memory; then a member is removed (or added) through instance
//     A, a token revoked (or a session ended) and a session exchanged, the primary
//     is killed (SIGKILL), the replica resumed and promoted. The promoted replica's
//     replication offset proves the writes lost (the test fails as wrongly set up
//     otherwise). From the revocation until seconds after both instances serve
//     from the cache again, neither lists the removed member (or fails to list the
//     added one), directly or nested, and both refuse the token; afterwards
//     neither exchanges the session again.
//   - TestClusterLostRemoval: the same removal lost by the Cluster shard that holds
//     the group's keys (found by the group's hash tag), its replica promoted by
//     the Cluster. Tokens are left out: their records land on any shard.
//
// The groups and the signed-in account are the tests' own (created and deleted by
// test/harness/sambatest), so the DC's fixture is never changed. Run with the DC's env
// exported and redis-server, redis-cli installed:
//
//	set -a; . /tmp/dirgate-samba/env; set +a
//	CI=true go test -race -count=1 -p 1 -v ./test/suite/redisfailover/
//
// or as part of make test-faults. Without a DC or Redis the tests skip, and fail
// under CI=true.
package redisfailover
