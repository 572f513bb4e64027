# The user's workflow. `make lab` brings the lab up end to end; `make test` runs the offline suite
# (the same command .ci/run calls). Run `make help` for the list.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= lab
STATE_DIR := $(CURDIR)/.pulumi-state
LAB_PASSPHRASE := gpu-platform-lab-only
ifeq ($(STACK),lab)
# Lab only: a local file backend inside the repository (no Pulumi Cloud account needed) and a
# passphrase that protects nothing of value. Other stacks use the backend you logged in to and
# their own secrets provider.
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_CONFIG_PASSPHRASE ?= $(LAB_PASSPHRASE)
endif
KUBECONFIG_DIR := $(CURDIR)/.lab/kubeconfigs
PULUMI := pulumi --non-interactive

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

.PHONY: venv
venv: $(BIN)/python ## Create .venv with the pinned program, policy and test dependencies
	$(BIN)/pip install --quiet -r requirements-dev.txt -c constraints.txt

.PHONY: test
test: ## The offline suite: mocks, policies, contracts, unit tests (never touches a live stack)
	$(BIN)/python -m pytest -q -m "not live and not integration"

.PHONY: check
check: ## Static checks: ruff (lint + format), mypy, shellcheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy components policies/gpu_platform_policies
	find scripts -name '*.sh' -print0 | xargs -0 -r $(BIN)/shellcheck

.PHONY: preflight
preflight: ## Check this host can run the lab (Docker, Linux, CPUs, memory, disk, kind, kubectl)
	$(BIN)/python -m components.preflight

.PHONY: lab
lab: venv preflight charts ## Bring the lab up end to end: pulumi up, acceptance suite, kubeconfigs
	mkdir -p $(STATE_DIR)
	$(PULUMI) stack select lab --create
	$(PULUMI) up --yes --stack lab --skip-preview
	$(MAKE) --no-print-directory acceptance STACK=lab
	$(MAKE) --no-print-directory kubeconfigs STACK=lab

.PHONY: kubeconfigs
kubeconfigs: ## Write each tenant's admin kubeconfig to .lab/kubeconfigs/ (mode 600)
	mkdir -p $(KUBECONFIG_DIR) && chmod 700 $(KUBECONFIG_DIR)
	$(PULUMI) stack output --stack $(STACK) --json --show-secrets tenantKubeconfigs \
	  | $(BIN)/python scripts/write_kubeconfigs.py $(KUBECONFIG_DIR)

.PHONY: preview
preview: charts ## pulumi preview of STACK (lab|prod) with the policy pack and that stack's policy config
	$(PULUMI) preview --stack $(STACK) \
	  --policy-pack policies --policy-pack-config policies/config/$(STACK).json

.PHONY: acceptance
acceptance: ## The eight acceptance tests (and extras) against the deployed STACK; report in reports/
	mkdir -p reports
	GPU_PLATFORM_STACK=$(STACK) \
	  $(BIN)/python -m pytest tests/acceptance -m live -p no:cacheprovider --junitxml reports/acceptance.xml

.PHONY: destroy
destroy: ## Tear STACK down (lab: also the kind cluster and worker containers)
	$(PULUMI) destroy --yes --stack $(STACK)
	rm -rf $(KUBECONFIG_DIR)

.PHONY: versions
versions: ## Print every pinned upstream version
	$(BIN)/python -m components.versions

.PHONY: bench
bench: ## Evaluation cost, critical path and control-plane footprint (see README)
	$(BIN)/python -m benchmarks

.PHONY: charts
charts: venv ## Download the pinned chart archives into the per-user cache (the lab and previews install from it)
	$(BIN)/python scripts/fetch_charts.py

.PHONY: fetch-upstream
fetch-upstream: charts ## charts, plus the upstream data files the contract tests read (.upstream/)
	bash scripts/fetch-upstream.sh .upstream

.PHONY: docs
docs: ## Regenerate README.md's configuration reference from the pydantic models
	$(BIN)/python -m components.config_reference --write README.md

.PHONY: integration
integration: ## Opt-in, ~15 min: up -> acceptance -> destroy of the lab through the Automation API
	GPU_PLATFORM_INTEGRATION=1 $(BIN)/python -m pytest tests/integration -m integration -p no:cacheprovider

.PHONY: bench-ci
bench-ci: ## The benchmark's structural checks, as CI runs them (no absolute timings)
	$(BIN)/python -m benchmarks --ci
