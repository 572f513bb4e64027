# The user's workflow. `make lab` brings the lab up end to end; `make test` runs the offline suite
# (the same command .ci/run calls). Run `make help` for the list.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.gpu-platform-installed
POLICY_VENV := policies/.venv
POLICY_STAMP := $(POLICY_VENV)/.gpu-platform-installed
STACK ?= lab
STATE_DIR := $(CURDIR)/.pulumi-state
LAB_PASSPHRASE := gpu-platform-lab-only
ifeq ($(STACK),lab)
# Lab only: a local file backend inside the repository (no Pulumi Cloud account needed) and a
# passphrase that protects nothing of value. Other stacks use the backend you logged in to and
# their own secrets provider.
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_CONFIG_PASSPHRASE ?= $(LAB_PASSPHRASE)
# preview, kubeconfigs and destroy work before the first `make lab`: the state directory and the
# (empty) stack are created first.
STACK_READY := lab-stack
endif
KUBECONFIG_DIR := $(CURDIR)/.lab/kubeconfigs
# Every pulumi command runs with a private TMPDIR removed when it ends: the kubernetes provider
# leaves each tenant's admin kubeconfig in the temp dir otherwise (scripts/with-private-tmpdir.sh).
PULUMI := bash scripts/with-private-tmpdir.sh pulumi --non-interactive

.PHONY: help
help: ## List the targets
	@echo "Start here: make validate (check a stack file offline), make lab (bring the lab up), make test"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-17s %s\n", $$1, $$2}'

# A virtualenv is (re)installed only when a requirements file changes (the stamp is older), so
# `make test` on a fresh clone prepares .venv first and on a prepared one starts at once, silently.
$(VENV_STAMP): requirements.txt requirements-dev.txt policies/requirements.txt constraints.txt
	@echo "== preparing $(VENV): pinned program, policy and test dependencies"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	@touch $@

.PHONY: venv
venv: $(VENV_STAMP) ## Create .venv with the pinned program, policy and test dependencies

# The policy pack runs in its own interpreter: PulumiPolicy.yaml names policies/.venv, and the CLI
# never installs a local --policy-pack's requirements (pulumi/pulumi v3.259.0,
# pkg/engine/update.go:278-330 loads local packs with no install step; only packs enforced from
# Pulumi Cloud are installed, pkg/engine/policypacks.go:34-160). `make preview`, .ci/run and the
# workflows all create it here.
$(POLICY_STAMP): policies/requirements.txt constraints.txt
	@echo "== preparing $(POLICY_VENV): the policy pack's own interpreter (PulumiPolicy.yaml)"
	@test -x $(POLICY_VENV)/bin/python || $(PYTHON) -m venv $(POLICY_VENV)
	@$(POLICY_VENV)/bin/python -m pip install --quiet --upgrade pip
	@$(POLICY_VENV)/bin/python -m pip install --quiet -r policies/requirements.txt -c constraints.txt
	@touch $@

.PHONY: policy-venv
policy-venv: $(POLICY_STAMP) ## Create policies/.venv, the interpreter the CLI runs the policy pack with

# The lab's local file backend: the CLI opens it but never creates it (pulumi/pulumi v3.259.0,
# pkg/backend/diy/backend.go:283 returns the open error), so every target that talks to the lab
# stack creates it, and the stack, first.
$(STATE_DIR):
	mkdir -p $@

.PHONY: lab-stack
lab-stack: | tools $(STATE_DIR)
	$(PULUMI) stack select lab --create

# The backup tests' S3 server and SigV4 oracle (moto, botocore) in their own interpreter:
# botocore needs python-dateutil<3 and kubernetes (.venv) >=3 (tests/backup/requirements-s3.txt).
BACKUP_TEST_VENV := tests/backup/.venv
BACKUP_TEST_STAMP := $(BACKUP_TEST_VENV)/.gpu-platform-installed
$(BACKUP_TEST_STAMP): tests/backup/requirements-s3.txt
	@echo "== preparing $(BACKUP_TEST_VENV): the backup tests' S3 server (moto) and signer (botocore)"
	@test -x $(BACKUP_TEST_VENV)/bin/python || $(PYTHON) -m venv $(BACKUP_TEST_VENV)
	@$(BACKUP_TEST_VENV)/bin/python -m pip install --quiet -r tests/backup/requirements-s3.txt
	@touch $@

.PHONY: backup-test-venv
backup-test-venv: $(BACKUP_TEST_STAMP) ## Create tests/backup/.venv (moto, botocore) for the backup tests

.PHONY: test
# pytest exits 5 when it collected no test. make turns every failed recipe into its own exit
# status 2, so only the recipe can tell "no tests ran" apart from a failure and say so.
# The offline suite runs on TEST_WORKERS processes (pytest-xdist; `auto`: one per CPU, `0`: in
# this process alone); worksteal: an idle worker takes tests queued on a busy one.
# docs/testing.md gives its time on the 2-core machine.
TEST_WORKERS ?= auto
test: venv policy-venv backup-test-venv ## The offline suite: mocks, policies, contracts, unit tests (never touches a live stack)
	$(BIN)/python -m pytest -q -m "not live and not integration" --ignore=tests/local \
	  -n $(TEST_WORKERS) --dist worksteal || { status=$$?; \
	  if [ $$status -eq 5 ]; then echo "FAIL: no tests ran (pytest collected none)" >&2; fi; \
	  exit $$status; }

.PHONY: local-e2e
# The local tier (tests/local, docs/testing.md): real etcd, kube-apiserver and
# kube-controller-manager on 127.0.0.1, built from pinned Go modules once per machine into the
# per-user cache (scripts/local_e2e/build-kube-tools.sh; tens of minutes the first time). Not part
# of `make test`: .ci/run runs it after `make test`. The real-engine part (tests/local/engine)
# also builds the Pulumi CLI and the kubernetes provider (scripts/local_e2e/build-pulumi-tools.sh,
# same cache) and runs the program, which installs its charts from .charts/ (`make charts`), with
# the policy pack's interpreter (policies/.venv).
local-e2e: venv policy-venv charts ## Real API servers on 127.0.0.1: the charts' CRDs, a server-side dry-run of both stacks, the tenant policy on real CREATEs (report in reports/)
	bash scripts/local_e2e/build-kube-tools.sh
	bash scripts/local_e2e/build-pulumi-tools.sh
	mkdir -p reports
	$(BIN)/python -m pytest tests/local -p no:cacheprovider -rs --durations=10 \
	  --junitxml reports/local-e2e.xml || { status=$$?; \
	  if [ $$status -eq 5 ]; then echo "FAIL: no tests ran (pytest collected none)" >&2; fi; \
	  exit $$status; }

.PHONY: check
check: ## Static checks: ruff (lint + format), mypy, the import layers, shellcheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy components policies/gpu_platform_policies
	$(BIN)/lint-imports
	find scripts -name '*.sh' -print0 | xargs -0 -r $(BIN)/shellcheck
	$(BIN)/shellcheck tests/local/engine/bin/policy-pack

# What a target needs on PATH, checked first, with the system Python and before any virtualenv:
# one line per missing tool with its install command (scripts/preflight.py), so `make preview`
# without the CLI says so instead of `pulumi: command not found`. Each target below names itself
# (TOOLS_FOR, a target-specific variable its prerequisites inherit).
.PHONY: tools
tools: ## Check the tools a target needs are on PATH (make tools TOOLS_FOR=lab): pulumi, docker, kind, kubectl
	@$(PYTHON) scripts/preflight.py --stack $(STACK) $(or $(TOOLS_FOR),lab)

.PHONY: preflight
preflight: venv ## Check this host can run the lab (Docker, Linux, CPUs, memory, disk, kind, kubectl)
	$(BIN)/python -m components.lab.preflight

# make tenant-user (docs/tenant-users.md): TENANT (below), MEMBER, NAMESPACES and where from/to.
MEMBER ?=
ADMIN_KUBECONFIG ?=
TOKEN_DURATION ?= 24h
.PHONY: tenant-user
tenant-user: ## A namespace-scoped kubeconfig for a tenant's team member: TENANT=tenant-a MEMBER=alice NAMESPACES=ml,inference (edit there only; ADMIN_KUBECONFIG=, OUTPUT=, TOKEN_DURATION=24h)
	@TENANT_KUBECONFIG="$(or $(ADMIN_KUBECONFIG),$(KUBECONFIG_DIR)/$(TENANT).yaml)" \
	  TEAM_MEMBER="$(MEMBER)" NAMESPACES="$(NAMESPACES)" \
	  OUTPUT="$(or $(OUTPUT),$(KUBECONFIG_DIR)/$(TENANT)-$(MEMBER).yaml)" \
	  TOKEN_DURATION="$(TOKEN_DURATION)" bash scripts/tenant/user-kubeconfig.sh

.PHONY: capacity
NODES ?=
capacity: venv ## What each tenant of STACK costs the management cluster, the total and how many more fit (NODES=a kubectl get nodes -o json file; FILE=another stack file)
	$(BIN)/python scripts/capacity.py --stack $(STACK) $(if $(FILE),--file $(FILE)) $(if $(NODES),--nodes $(NODES))

.PHONY: validate
validate: venv ## Check STACK's stack file offline in seconds: config, the program under mocks, the policy pack (FILE=another stack file)
	$(BIN)/python scripts/validate.py --stack $(STACK) $(if $(FILE),--file $(FILE))

.PHONY: lab
# `up` runs with the policy pack and the lab's policy config, the form preview.yml and
# lab-e2e.yml use: the pack guards the deployment itself, not only PR previews (the CLI's `up`
# takes the same --policy-pack/--policy-pack-config flags as `preview`, pulumi/pulumi v3.259.0
# pkg/cmd/pulumi/operations/up.go:833-840).
lab: TOOLS_FOR := lab
lab: tools venv policy-venv preflight charts lab-stack ## Bring the lab up end to end: pulumi up (with the policy pack), acceptance suite, kubeconfigs
	$(if $(UP_EVENT_LOG),mkdir -p $(dir $(UP_EVENT_LOG)))
	$(PULUMI) up --yes --stack lab --skip-preview \
	  --policy-pack policies --policy-pack-config policies/config/lab.json \
	  $(if $(UP_EVENT_LOG),--event-log $(UP_EVENT_LOG))
	@# The kubeconfigs are written whatever the acceptance suite says: they are what a failed
	@# test is looked into with. make lab still fails when the suite fails.
	status=0; $(MAKE) --no-print-directory acceptance STACK=lab || status=$$?; \
	  $(MAKE) --no-print-directory kubeconfigs STACK=lab; exit $$status

.PHONY: kubeconfigs
kubeconfigs: TOOLS_FOR := kubeconfigs
kubeconfigs: tools venv $(STACK_READY) ## Write each tenant's admin kubeconfig to .lab/kubeconfigs/ (mode 600)
	mkdir -p $(KUBECONFIG_DIR) && chmod 700 $(KUBECONFIG_DIR)
	@if ! out=$$($(PULUMI) stack output --stack $(STACK) --json --show-secrets tenantKubeconfigs); then \
	  echo "no tenant kubeconfigs in stack $(STACK): deploy it first (make lab, or pulumi up -s $(STACK))" >&2; \
	  exit 1; \
	fi; \
	printf '%s' "$$out" | $(BIN)/python scripts/write_kubeconfigs.py $(KUBECONFIG_DIR)

.PHONY: preview
preview: TOOLS_FOR := preview
preview: tools venv policy-venv charts $(STACK_READY) ## pulumi preview of STACK (lab|prod) with the policy pack and that stack's policy config
	$(PULUMI) preview --stack $(STACK) \
	  --policy-pack policies --policy-pack-config policies/config/$(STACK).json

.PHONY: up
REFRESH ?=
# For prod (and any stack but the lab, whose `make lab` also runs the acceptance suite): up with
# the policy pack, as preview runs it, and the CLI in a private TMPDIR like every target here.
up: TOOLS_FOR := preview
up: tools venv policy-venv charts $(STACK_READY) ## pulumi up of STACK with the policy pack and that stack's policy config (REFRESH=1: --refresh first)
	$(PULUMI) up --yes --stack $(STACK) $(if $(REFRESH),--refresh) \
	  --policy-pack policies --policy-pack-config policies/config/$(STACK).json

.PHONY: acceptance
acceptance: venv ## The eight acceptance tests (and extras) against the deployed STACK; report in reports/
	mkdir -p reports
	GPU_PLATFORM_STACK=$(STACK) \
	  $(BIN)/python -m pytest tests/acceptance -m live -p no:cacheprovider --junitxml reports/acceptance.xml

.PHONY: destroy
destroy: TOOLS_FOR := destroy
destroy: tools $(STACK_READY) ## Tear STACK down (lab: also the kind cluster and worker containers)
	$(PULUMI) destroy --yes --stack $(STACK)
	rm -rf $(KUBECONFIG_DIR)

.PHONY: versions
versions: venv ## Print every pinned upstream version
	$(BIN)/python -m components.versions

.PHONY: bench
bench: venv ## Evaluation cost, critical path and control-plane footprint (docs/benchmark.md)
	$(BIN)/python -m benchmarks

.PHONY: kamaji-chart
kamaji-chart: venv ## The pinned Kamaji chart, verified, in .charts/ (the program installs it from there; assembled in the per-user cache)
	$(BIN)/python scripts/fetch_charts.py --only kamaji --project .

.PHONY: charts
charts: venv ## Every pinned chart, verified, in the per-user cache and in .charts/ (the program installs from there; offline once done)
	$(BIN)/python scripts/fetch_charts.py --project .

.PHONY: fetch-upstream
fetch-upstream: charts ## charts, plus the upstream data files the contract tests read (.upstream/)
	bash scripts/fetch-upstream.sh .upstream

.PHONY: dashboards
dashboards: venv ## HAMi's published dashboard at the pinned tag, checked, in the per-user cache (an offline test reads it)
	$(BIN)/python scripts/fetch_dashboards.py

# WINDOW: 24h, 7d, 4w ...; FORMAT: table, csv or json; OUTPUT: a file instead of stdout.
WINDOW ?= 7d
FORMAT ?= table
.PHONY: usage
usage: venv $(STACK_READY) ## Per-tenant GPU usage (allocated, used, efficiency) over WINDOW=7d from STACK's metrics (FORMAT=table|csv|json, OUTPUT=file, TENANT=one tenant)
	@$(PULUMI) stack output --stack $(STACK) --show-secrets managementKubeconfig \
	  | $(BIN)/python scripts/usage.py --kubeconfig-stdin --window $(WINDOW) --format $(FORMAT) \
	    $(if $(OUTPUT),--output $(OUTPUT)) $(if $(TENANT),--tenant $(TENANT))

# A tenant's own usage, as any of its users reads it with their own kubeconfig (docs/metrics.md):
# the ConfigMap each tenant's usage publisher writes into the tenant's cluster every hour.
MEMBER_KUBECONFIG ?=
.PHONY: tenant-usage
tenant-usage: ## A tenant's own GPU usage, read inside it with a user's kubeconfig: TENANT= MEMBER= (or MEMBER_KUBECONFIG=; FORMAT=json)
	@kubectl --kubeconfig "$(or $(MEMBER_KUBECONFIG),$(KUBECONFIG_DIR)/$(TENANT)$(if $(MEMBER),-$(MEMBER)).yaml)" \
	  get configmap gpu-usage --namespace gpu-platform-usage \
	  --output 'jsonpath={.data.usage\.$(if $(filter json,$(FORMAT)),json,txt)}'

# Backups (docs/backups.md): a Job from the tenant's own CronJob in the management cluster.
TENANT ?=
BACKUP ?=
YES ?=
ACCEPT_SUSPECT ?=
FROM_TENANT ?=
BACKUPS := $(BIN)/python scripts/backups.py --kubeconfig-stdin
MANAGEMENT_KUBECONFIG := $(PULUMI) stack output --stack $(STACK) --show-secrets managementKubeconfig

.PHONY: backup backups restore
backup: venv $(STACK_READY) ## Back TENANT up now (verified, like the scheduled backups)
	@test -n "$(TENANT)" || { echo "make backup TENANT=<name>" >&2; exit 2; }
	@$(MANAGEMENT_KUBECONFIG) | $(BACKUPS) backup --tenant $(TENANT) $(if $(ACCEPT_SUSPECT),--accept-suspect)

backups: venv $(STACK_READY) ## List TENANT's backups, newest first
	@test -n "$(TENANT)" || { echo "make backups TENANT=<name>" >&2; exit 2; }
	@$(MANAGEMENT_KUBECONFIG) | $(BACKUPS) list --tenant $(TENANT)

restore: venv $(STACK_READY) ## Restore TENANT from BACKUP=<name>|latest (stops its API server; needs YES=1)
	@test -n "$(TENANT)" && test -n "$(BACKUP)" || { echo "make restore TENANT=<name> BACKUP=<name>|latest YES=1" >&2; exit 2; }
	@$(MANAGEMENT_KUBECONFIG) | $(BACKUPS) restore --tenant $(TENANT) --backup $(BACKUP) $(if $(FROM_TENANT),--from-tenant $(FROM_TENANT)) $(if $(YES),--yes)

.PHONY: docs
docs: venv ## Regenerate docs/configuration.md's reference and the lab's image list (docs/lab.md)
	$(BIN)/python -m components.config_reference --write docs/configuration.md
	$(BIN)/python scripts/lab_images.py

.PHONY: clean-caches
clean-caches: ## Remove the lab's registry caches and their images (make destroy keeps them)
	bash scripts/management/registry-caches-remove.sh

.PHONY: integration
integration: venv ## Opt-in, ~15 min: up -> acceptance -> destroy of the lab through the Automation API
	GPU_PLATFORM_INTEGRATION=1 $(BIN)/python -m pytest tests/integration -m integration -p no:cacheprovider

.PHONY: bench-ci
bench-ci: venv ## The benchmark's structural checks, as CI runs them (no absolute timings)
	$(BIN)/python -m benchmarks --ci

# make lab's engine event log (pulumi up --event-log, needs PULUMI_DEBUG_COMMANDS=true), and the
# comparison of a recorded one with the bring-up model (benchmarks/measured.py).
UP_EVENT_LOG ?=
EVENTS ?= reports/lab-up-events.jsonl
JSON ?=

.PHONY: bringup-compare
bringup-compare: venv ## A recorded make lab (EVENTS=, from UP_EVENT_LOG=) per resource next to the bring-up model's estimates (JSON= to keep it)
	$(BIN)/python -m benchmarks.measured $(EVENTS) $(if $(JSON),--json $(JSON))
