// Package chaos is dirgate's chaos suite, after Jepsen: a workload of clients and a
// nemesis run side by side against a whole deployment, every operation is recorded
// with its start, end and outcome, and the history is judged afterwards by
// test/suite/chaos/history against the promises dirgate makes under faults: no stale
// read beyond a bound, no lost or resurrected write, no revoked or disabled account's
// token accepted, availability outside the faults.
//
// The deployment is real processes: the two replicating Samba AD DCs of
// test/harness/samba/pair.sh; a Redis primary, its replica and three Sentinels with a
// quorum of two and fast failover timings (test/harness/redistest); two dirgate
// replicas, A and B (test/harness/child), in Sentinel mode with both DCs, DC1
// preferred, a 5 s health interval, a 250 ms Redis retry interval and a 15 s
// principal TTL. The suite's own objects live in OU=dirgate-chaos-<pid>-<run> of the
// pair: six users (the pool the workload moves in and out of groups, disables and
// signs in), two callers named by the tokens file, four groups, the second nested in
// the first; created on DC1, waited for on DC2, deleted at the end.
//
// The workload: four listers (direct and includeIndirect, either replica, either
// caller), two writers removing and adding pool users through dirgate, two direct
// changers adding and removing members on either DC as its administrator (one of them
// also nests and unnests groups and disables and enables users), and a sign-in
// process that signs pool users in, uses their tokens, and revokes some and keeps
// using them. The nemesis kills a DC, blackholes its link, pauses its inbound
// replication or delays its LDAPS by 100 ms each way (test/harness/samba/pair.sh
// delay), kills the Redis primary (Sentinel promotes the replica; the old primary
// comes back as a replica), stops the Redis replica (SIGSTOP), kills a dirgate
// replica or the one leading the change feed (dirgate_changefeed_leader) and restarts
// it. In the "quorum" mode it never takes both DCs, both Redis servers or both
// replicas down at once; in the "outage" mode faults overlap freely (two faults never
// hit one thing). After the run every fault is healed, the DCs replicate, the suite
// waits 10 s and lists every group on each replica once more, so that the final state
// is checked too.
//
// Everything the run does is drawn up front from one seed (math/rand/v2): which
// operation each process makes, when and on what, and which fault when and for how
// long. A process that falls behind makes its next operation at once. So a seed
// replays the same schedule, though not the same timing of the answers. The seed is
// always logged.
//
// The short run is part of make test-faults: 30 s in the quorum mode, twice, with a
// fixed seed and a random one (TestChaos/fixed, TestChaos/random). The long run is
// make chaos: 20 minutes with a random seed. With the pair's env exported:
//
//	set -a; . /tmp/dirgate-pair/env; set +a
//	CI=true go test -race -count=1 -v -run TestChaos ./test/suite/chaos/       # the short run
//	make chaos                                                           # 20 minutes
//	make chaos DIRGATE_CHAOS_DURATION=5m DIRGATE_CHAOS_MODE=outage
//	DIRGATE_CHAOS_SEED=1234 DIRGATE_CHAOS_DURATION=30s \
//	  go test -race -count=1 -v -run TestChaos ./test/suite/chaos/             # replay seed 1234
//
// DIRGATE_CHAOS_DURATION sets the length of each run (default 30s), DIRGATE_CHAOS_MODE
// quorum (default) or outage, DIRGATE_CHAOS_SEED runs that seed alone
// (TestChaos/replay), and DIRGATE_CHAOS_FAULTS (a comma-separated subset of the
// fault menu, say kill-dc,delay-dc) narrows the nemesis to those faults, to dwell on
// one combination. A replay needs the length, mode and faults of the original run
// too; the run logs them.
//
// The history is written, whatever the outcome, as JSON lines (history.Write) to
// DIRGATE_CHAOS_OUT/seed-<seed>/history.jsonl, or without DIRGATE_CHAOS_OUT to
// dirgate-chaos-<seed>/history.jsonl under the system's temporary directory, with
// every replica process's log beside it (A-1.log, and A-2.log after a restart); the
// path is logged. The test fails on every anomaly the checker reports.
//
// Without the pair's variables (DIRGATE_TEST_PAIR_*) or redis-server the suite
// skips, and fails under CI=true. It holds the pair for its duration
// (sambatest.PairFromEnv).
package chaos
