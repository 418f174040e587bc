# Two commands on a fresh machine: `make run` serves the gateway locally,
# `make test` runs every check. Each creates the virtualenv it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: run test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# Local gateway with an embedded SSM stand-in and a built-in upstream
# simulator: no AWS account, no API key.
run: $(STAMP)
	$(BIN)/policy-gateway serve --simulate-upstream --embedded-ssm

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

# Everything but the slow tiers (markers in pyproject.toml): the loop while you work.
test-fast: lint
	$(BIN)/python -m pytest -m "not load and not sam_build and not cfn_lint"

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .aws-sam .mypy_cache .ruff_cache .pytest_cache
