// Package failover holds dirgate's end-to-end failover tests: two dirgate
// replicas, sharing one Redis, run as child processes (test/harness/child) in front of the
// two replicating Samba AD DCs of test/harness/samba/pair.sh, and the tests kill a DC, drop
// its packets or hold back its replication while clients keep listing, signing in
// and changing memberships. They count every request that failed or took over 5 s
// (none may) and log the figures docs/benchmarks.md publishes: the slowest answer,
// the time from the fault to the last slow answer, and how fresh the change feed
// stays across a switch of DC.
//
// The tests skip without the pair's variables (DIRGATE_TEST_PAIR_*), unless CI is
// true, and hold the pair for their duration (sambatest.PairFromEnv), so no other
// package's test meets a DC they killed.
package failover
