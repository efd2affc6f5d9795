# test/suite/chaos/chaos.mk: the chaos suite's long run (test/suite/chaos/doc.go). The
# main Makefile includes it after test/harness/samba/samba.mk, whose pair.sh it uses.
#
#   make chaos      a DIRGATE_CHAOS_DURATION run (default 20m) of TestChaos with a
#                   random seed, or the seed of DIRGATE_CHAOS_SEED, in the mode of
#                   DIRGATE_CHAOS_MODE (quorum or outage; default quorum), with -race.
#                   When DIRGATE_TEST_PAIR_STATE_DIR is set (a pair's env file
#                   exported), that pair is used; otherwise a pair is started in
#                   $(SAMBA_PAIR_STATE_DIR) and stopped after the run.
#
# The short run (30 s, twice) is part of make test-faults (test/suite/faults/faults.mk).
# The history and the replicas' logs go to DIRGATE_CHAOS_OUT/seed-<seed>/, or
# $TMPDIR/dirgate-chaos-<seed>/; the test logs the path.

DIRGATE_CHAOS_DURATION ?= 20m
DIRGATE_CHAOS_MODE ?= quorum
CHAOS_GO_TEST := DIRGATE_CHAOS_DURATION=$(DIRGATE_CHAOS_DURATION) DIRGATE_CHAOS_MODE=$(DIRGATE_CHAOS_MODE) \
	go test -race -count=1 -timeout 0 -v -run 'TestChaos/(random|replay)$$' ./test/suite/chaos/

# with-pair starts the pair, exports its env, runs CMD and stops the pair whatever
# CMD's result, keeping CMD's exit status (as with-samba does for the single DC).
with-pair = trap '$(SAMBA_PAIR) stop $(SAMBA_PAIR_STATE_DIR)' EXIT; trap 'exit 130' INT TERM; \
	$(SAMBA_PAIR) start $(SAMBA_PAIR_STATE_DIR) && set -a && . $(SAMBA_PAIR_ENV) && set +a && $(1)

.PHONY: chaos
chaos: ## the chaos suite's long run: DCs, Redis and replicas fail under load for DIRGATE_CHAOS_DURATION (20m)
ifeq ($(DIRGATE_TEST_PAIR_STATE_DIR),)
	$(call with-pair,$(CHAOS_GO_TEST))
else
	$(CHAOS_GO_TEST)
endif
