# test/harness/samba/samba.mk: targets for the throw-away Samba AD domain controller
# used by the integration tests. The main Makefile includes this file.
#
#   make samba-start     provision and start a DC, write $(SAMBA_ENV)
#   make samba-status    say whether it answers
#   make samba-stop      stop it and delete its files (safe to repeat)
#   make samba-pair-start / samba-pair-stop / samba-pair-status
#                        the same for two replicating DCs (test/harness/samba/pair.sh)
#   make samba-forest-start / samba-forest-stop / samba-forest-status
#                        the same for two domains joined by a forest trust
#                        (test/harness/samba/forest.sh)
#
# A test target runs commands against a DC with $(call with-samba,CMD): it
# starts the DC, exports the DIRGATE_TEST_LDAP_* variables from $(SAMBA_ENV),
# runs CMD and stops the DC whatever CMD's result (also on Ctrl-C), keeping
# CMD's exit status. Example:
#
#   test:
#   	$(call with-samba,go test -race ./...)

# STATE_DIR: short, outside the work tree (Samba's unix socket paths under it
# must stay within 108 bytes).
SAMBA_STATE_DIR ?= /tmp/dirgate-samba
SAMBA_ENV := $(SAMBA_STATE_DIR)/env
SAMBA_DC := bash $(abspath $(dir $(lastword $(MAKEFILE_LIST))))/dc.sh

.PHONY: samba-start samba-stop samba-status samba-pair-start samba-pair-stop samba-pair-status \
	samba-forest-start samba-forest-stop samba-forest-status

samba-start: ## Start the test Samba AD DC (writes $(SAMBA_ENV))
	$(SAMBA_DC) start $(SAMBA_STATE_DIR)

samba-stop: ## Stop the test Samba AD DC and delete its files
	$(SAMBA_DC) stop $(SAMBA_STATE_DIR)

samba-status: ## Say whether the test Samba AD DC answers
	$(SAMBA_DC) status $(SAMBA_STATE_DIR)

# with-samba expands to one shell line (make runs each recipe line in its own
# shell, and the trap must cover the whole run).
with-samba = trap '$(SAMBA_DC) stop $(SAMBA_STATE_DIR)' EXIT; trap 'exit 130' INT TERM; \
	$(SAMBA_DC) start $(SAMBA_STATE_DIR) && set -a && . $(SAMBA_ENV) && set +a && $(1)

# Two replicating DCs in network namespaces (test/harness/samba/pair.sh), for failover
# tests; they run next to the single DC. Source $(SAMBA_PAIR_ENV) for
# DIRGATE_TEST_PAIR_*.
SAMBA_PAIR_STATE_DIR ?= /tmp/dirgate-pair
SAMBA_PAIR_ENV := $(SAMBA_PAIR_STATE_DIR)/env
SAMBA_PAIR := bash $(abspath $(dir $(lastword $(MAKEFILE_LIST))))/pair.sh

samba-pair-start: ## Start the two replicating test DCs (writes $(SAMBA_PAIR_ENV))
	$(SAMBA_PAIR) start $(SAMBA_PAIR_STATE_DIR)

samba-pair-stop: ## Stop the two test DCs, remove their namespaces and files
	$(SAMBA_PAIR) stop $(SAMBA_PAIR_STATE_DIR)

samba-pair-status: ## Say whether each of the two test DCs answers
	$(SAMBA_PAIR) status $(SAMBA_PAIR_STATE_DIR)

# Two domains, each with one DC in a network namespace, joined by a two-way
# forest trust (test/harness/samba/forest.sh). Source $(SAMBA_FOREST_ENV) for
# DIRGATE_TEST_FOREST_*.
SAMBA_FOREST_STATE_DIR ?= /tmp/dirgate-forest
SAMBA_FOREST_ENV := $(SAMBA_FOREST_STATE_DIR)/env
SAMBA_FOREST := bash $(abspath $(dir $(lastword $(MAKEFILE_LIST))))/forest.sh

samba-forest-start: ## Start the two test domains joined by a forest trust (writes $(SAMBA_FOREST_ENV))
	$(SAMBA_FOREST) start $(SAMBA_FOREST_STATE_DIR)

samba-forest-stop: ## Stop the two test domains, remove their namespaces and files
	$(SAMBA_FOREST) stop $(SAMBA_FOREST_STATE_DIR)

samba-forest-status: ## Say whether each test domain's DC answers
	$(SAMBA_FOREST) status $(SAMBA_FOREST_STATE_DIR)
