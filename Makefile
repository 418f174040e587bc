# Two commands on a fresh machine: `make run` serves the gateway locally,
# `make test` runs every check. Each creates the virtualenv it needs, from
# locks/dev.txt only (hash-checked), so every machine tests the same versions.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEV_LOCK := locks/dev.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(DEV_LOCK) | cksum | cut -d' ' -f1)
# checkov cannot share the dev lock (release/locks.py): its own virtualenv.
SCAN_VENV := .venv-scan
SCAN_LOCK := locks/scan.txt
SCAN_STAMP := $(SCAN_VENV)/.installed-$(shell cat $(SCAN_LOCK) | cksum | cut -d' ' -f1)

.PHONY: run test test-fast test-unit lint scan check-locks lock lock-upgrade bench clean

# The project itself goes in last, editable, without dependencies and without
# build isolation: everything it needs, build tools included, came from the lock.
$(STAMP): pyproject.toml $(DEV_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(DEV_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-*
	touch $@

# Local gateway with an embedded SSM stand-in and a built-in upstream
# simulator: no AWS account, no API key.
run: $(STAMP)
	$(BIN)/policy-gateway serve --simulate-upstream --embedded-ssm

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

$(SCAN_STAMP): $(SCAN_LOCK)
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --require-hashes -r $(SCAN_LOCK)
	rm -f $(SCAN_VENV)/.installed-*
	touch $@

# The template against checkov's baseline: any finding that is neither fixed nor
# skipped in template.yaml with its reason fails the build. Offline: no API key
# (even one set in the shell), no guideline download, no version check.
scan: $(SCAN_STAMP)
	env -u BC_API_KEY BC_SKIP_MAPPING=TRUE CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE \
		$(SCAN_VENV)/bin/checkov \
		-f template.yaml --skip-download --quiet --compact

test: check-locks lint scan
	$(BIN)/python -m pytest

# The unit and gateway tiers, without the load tests (markers in pyproject.toml):
# the loop while you work. test-unit: the pure modules alone, in seconds.
test-fast: lint
	$(BIN)/python -m pytest -m "not load and not deploy"

test-unit: $(STAMP)
	$(BIN)/python -m pytest -m unit

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) $(SCAN_VENV) .aws-sam .mypy_cache .ruff_cache .pytest_cache
