# Two commands on a fresh machine: `make run` serves the gateway locally,
# `make test` runs every check. Each creates the virtualenv it needs from its
# own hash-checked lock: `make run` .venv-run from locks/serve.txt (serving and
# its stand-ins, nothing else), `make test` .venv from locks/dev.txt, so every
# machine tests the same versions. Every virtualenv first installs the pip of
# locks/pip.txt (release/venv.py): the pip a fresh python3 bundles cannot
# install every lock.
PYTHON ?= python3
PIP_LOCK := locks/pip.txt
NEW_VENV := $(PYTHON) release/venv.py
VENV := .venv
BIN := $(VENV)/bin
DEV_LOCK := locks/dev.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(PIP_LOCK) $(DEV_LOCK) | cksum | cut -d' ' -f1)
RUN_VENV := .venv-run
RUN_LOCK := locks/serve.txt
RUN_STAMP := $(RUN_VENV)/.installed-$(shell cat pyproject.toml $(PIP_LOCK) $(RUN_LOCK) | cksum | cut -d' ' -f1)
# checkov cannot share the dev lock (release/locks.py): its own virtualenv.
SCAN_VENV := .venv-scan
SCAN_LOCK := locks/scan.txt
SCAN_STAMP := $(SCAN_VENV)/.installed-$(shell cat $(PIP_LOCK) $(SCAN_LOCK) | cksum | cut -d' ' -f1)

# The official TypeScript SDK, a second client in the tests (tests/test_ts_client.py):
# installed by `npm ci` from its lock, integrity hashes checked, into the ignored
# tests/ts/node_modules. Needs node 20 and npm.
TS_DIR := tests/ts
TS_STAMP := $(TS_DIR)/node_modules/.installed-$(shell cat $(TS_DIR)/package.json $(TS_DIR)/package-lock.json | cksum | cut -d' ' -f1)

# The local run's ports: the gateway's, and the embedded AWS stand-in's.
PORT ?= 8080
SSM_PORT ?= 8787

.PHONY: run build test test-fast test-unit test-policy lint scan ts-client browser check-locks lock lock-upgrade bench clean

# The project itself goes in last, editable, without dependencies and without
# build isolation: everything it needs, build tools included, came from the lock.
$(STAMP): pyproject.toml $(PIP_LOCK) $(DEV_LOCK)
	$(NEW_VENV) $(VENV) $(DEV_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-*
	touch $@

# --no-compile: byte-compiling every module of moto and botocore up front costs
# more than compiling, on first import, the few a local run imports.
$(RUN_STAMP): pyproject.toml $(PIP_LOCK) $(RUN_LOCK)
	$(NEW_VENV) $(RUN_VENV) $(RUN_LOCK) --no-compile
	$(RUN_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	rm -f $(RUN_VENV)/.installed-*
	touch $@

# Local gateway with an embedded AWS stand-in (SSM, Secrets Manager, DynamoDB)
# and a built-in upstream simulator: no AWS account, no API key. A busy port
# stops it with one line, before anything starts: choose others with
# `make run PORT=... SSM_PORT=...`.
# Recorded conversations (the policy document's `record` option) go to ./records
# (RECORDS_DIR; read them with `policy-gateway history`).
RECORDS_DIR ?= $(CURDIR)/records
run: $(RUN_STAMP)
	RECORDS_DIR=$(RECORDS_DIR) $(RUN_VENV)/bin/policy-gateway serve --simulate-upstream \
		--embedded-ssm --port $(PORT) --embedded-ssm-port $(SSM_PORT)

# `sam build` with what it needs: the SAM CLI and the SBOM tool (cyclonedx-py)
# from the dev virtualenv; release/lambda.mk finds python3.13 on PATH or
# through pyenv. Then `sam deploy` (README: Deploy). SAM_BUILD_ARGS adds
# options, e.g. SAM_BUILD_ARGS="--parameter-overrides Architecture=x86_64".
build: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" SAM_CLI_TELEMETRY=0 $(BIN)/sam build $(SAM_BUILD_ARGS)

# Standard library only: it runs before the virtualenv is (re)built.
check-locks:
	$(PYTHON) release/locks.py check

# Regenerate every lock after a change to pyproject.toml's dependencies, keeping
# each pin that is still allowed; lock-upgrade moves every pin to the newest
# allowed version (docs/deploy.md: upgrading dependencies).
lock: $(STAMP)
	$(BIN)/python release/locks.py compile

lock-upgrade: $(STAMP)
	$(BIN)/python release/locks.py compile --upgrade

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

$(SCAN_STAMP): $(PIP_LOCK) $(SCAN_LOCK)
	$(NEW_VENV) $(SCAN_VENV) $(SCAN_LOCK)
	rm -f $(SCAN_VENV)/.installed-*
	touch $@

# The template against checkov's baseline: any finding that is neither fixed nor
# skipped in template.yaml with its reason fails the build. Offline: no API key
# (even one set in the shell), no guideline download, no version check.
scan: $(SCAN_STAMP)
	env -u BC_API_KEY BC_SKIP_MAPPING=TRUE CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE \
		$(SCAN_VENV)/bin/checkov \
		-f template.yaml --skip-download --quiet --compact

# npm ci empties node_modules first, so an older stamp goes with it.
$(TS_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { \
		echo "make test needs node (20 or later) and npm: the TypeScript SDK is one of the test clients"; exit 1; }
	cd $(TS_DIR) && npm ci
	touch $@

ts-client: $(TS_STAMP)

# The records page's test drives Debian's headless Chromium (tests/test_history.py):
# installed with apt-get where that is possible (root, or sudo without a password);
# elsewhere the test skips, except under CI (CI=true), where it fails.
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
		elif sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq chromium; \
		else echo "chromium is not installed and apt-get needs root: the browser test will skip"; fi; }

test: check-locks lint scan ts-client browser
	$(BIN)/python -m pytest

# The unit and gateway tiers, without the load tests (markers in pyproject.toml):
# the loop while you work. test-unit: the pure modules alone, in seconds.
test-fast: lint ts-client
	$(BIN)/python -m pytest -m "not load and not deploy and not slow"

test-unit: $(STAMP)
	$(BIN)/python -m pytest -m unit

# A policy's own tests (docs/policies.md: Testing it), in the dev virtualenv, with the
# policy's folder and the policies layer on the import path as a deployed gateway has
# them: make test-policy POLICY=examples/policies (a folder or a test file).
test-policy: $(STAMP)
	@test -n "$(POLICY)" || { echo "usage: make test-policy POLICY=<folder or test file>"; exit 2; }
	PYTHONPATH="$(abspath $(if $(wildcard $(POLICY)/.),$(POLICY),$(dir $(POLICY)))):$(CURDIR)/layers/policies" \
		$(BIN)/python -m pytest -p no:cacheprovider $(POLICY)

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) $(RUN_VENV) $(SCAN_VENV) $(TS_DIR)/node_modules .aws-sam .mypy_cache .ruff_cache .pytest_cache
