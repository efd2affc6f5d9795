# test/suite/faults/faults.mk: the fault and hostile-input suites. The main Makefile
# includes it after test/harness/samba/samba.mk, whose with-samba it uses.
#
#   make test-faults    fault tests (Redis killed or hung under load, the DC stopped or
#                       hung, a slow and cutting upstream, a soak run) and hostile-input
#                       tests, with -race (the dirgate binary under test is built with
#                       -race too). When DIRGATE_TEST_LDAP_URL is set (a DC's env file
#                       exported, as in CI after `make samba-start`), that DC is used;
#                       otherwise a throw-away DC is started and stopped around the run.
#
# Needs samba (installed by dc.sh), redis-server and redis-cli (test/run.sh installs
# them). Under CI=true a missing DC or Redis fails the tests instead of skipping them.
# TestAlertsFireOnFaults also needs prometheus (Debian's package, installed by
# test/run.sh; it adds about 1m45s). FAULTS_SOAK sets the soak's length (default 60s);
# the whole run takes about five minutes on the 2-core machine, plus about a minute
# and a half for test/suite/failover and two minutes for test/suite/chaos when the
# pair is there (test/suite/chaos alone, its race build included: 1m56s–2m04s,
# `go test -race -count=1 -v -run TestChaos ./test/suite/chaos/` with the pair's env
# exported).

FAULTS_SOAK ?= 60s
# test/suite/failover kills and cuts off the DCs of test/harness/samba/pair.sh (it
# needs the pair's DIRGATE_TEST_PAIR_* variables, which make test exports; without
# them it skips, and fails under CI=true): it runs here, one package at a time,
# because its 5 s bound on every answer must not be blurred by the whole suite
# competing for the two cores. test/suite/redisfailover makes Redis primaries fail
# over (Sentinel and Cluster, real processes) under two dirgate instances on the DC;
# it needs redis-server and redis-cli, and takes about two minutes (95 s measured with
# -race, plus its build). test/suite/chaos runs its short run here: 30 s of the
# workload under the nemesis, in the quorum mode, with a fixed seed and a random one
# (test/suite/chaos/doc.go); it needs the pair and Redis like the two above.
FAULTS_PKGS := ./test/harness/faultproxy/... ./test/suite/faults/... ./test/suite/hostile/... ./test/suite/failover/... ./test/suite/redisfailover/... ./test/suite/chaos/...
FAULTS_GO_TEST := DIRGATE_SOAK_DURATION=$(FAULTS_SOAK) go test -race -count=1 -p 1 -timeout 20m -v $(FAULTS_PKGS)

.PHONY: test-faults
test-faults: ## fault and hostile-input tests: Redis and DC faults, alerts, slow upstream, soak, injections (~5 min)
ifeq ($(DIRGATE_TEST_LDAP_URL),)
	$(call with-samba,$(FAULTS_GO_TEST))
else
	$(FAULTS_GO_TEST)
endif
