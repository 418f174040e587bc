# `sam build` runs this (template.yaml: BuildMethod makefile, ContextPath
# release/<Architecture>) for the function and the policies layer. It installs
# their dependencies from the hash-pinned locks only: Linux wheels for the
# Lambda runtime's Python and the chosen architecture, every file checked
# against the lock's sha256, nothing built from source. Each artifact gets a
# CycloneDX SBOM beside its code (README: "What ships"), and bytecode for
# python3.13 that a read-only tree can use (below: COMPILE).
#
# SAM sets ARTIFACTS_DIR and runs make in a scratch copy of the CodeUri /
# ContentUri directory; release/<arch>/Makefile sets ARCH and includes this.

RELEASE := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
ROOT := $(abspath $(RELEASE)/..)
LOCKS := $(ROOT)/locks
# The runtime's interpreter (template.yaml: Runtime): a python3.13 that runs
# from PATH, else pyenv's (its python3.13 shim runs only for a selected version,
# so the build takes the installed one's path, with no PYENV_VERSION needed).
ifndef PYTHON313
PYTHON313 := $(or \
	$(shell python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null), \
	$(shell v=$$(pyenv whence python3.13 2>/dev/null | tail -n 1) && [ -n "$$v" ] \
		&& echo "$$(pyenv root)/versions/$$v/bin/python3.13"))
endif
# The SBOM tool: cyclonedx-py on PATH, else the dev virtualenv's (`make build`
# creates it).
ifndef CYCLONEDX
CYCLONEDX := $(or $(shell command -v cyclonedx-py),$(wildcard $(ROOT)/.venv/bin/cyclonedx-py))
endif
# manylinux_2_28 on arm64 (release/locks.py), where hyperscan has no older wheel. pip does
# not widen a --platform to older glibc tags, so the older ones are named too.
PLATFORM_arm64 := manylinux_2_28_aarch64 manylinux2014_aarch64
PLATFORM_x86_64 := manylinux2014_x86_64
PLATFORM := $(PLATFORM_$(ARCH))

ifeq ($(PLATFORM),)
$(error ARCH must be arm64 or x86_64, not "$(ARCH)")
endif
ifeq ($(PYTHON313),)
$(error no python3.13 found on PATH or through pyenv: install one (pyenv install 3.13), \
	or build in a container (sam build --use-container))
endif
ifeq ($(CYCLONEDX),)
$(error cyclonedx-py (the SBOM tool) not found: run `make build`, which installs it with \
	the dev virtualenv and runs sam build, or put one on PATH (pip install cyclonedx-bom))
endif

# --only-binary and --platform: the wheels Lambda runs, never the build
# machine's; --require-hashes: every file is the one the lock names.
PIP_INSTALL = $(PYTHON313) -m pip install --quiet --disable-pip-version-check \
	--require-hashes --only-binary=:all: --no-compile \
	--implementation cp --python-version 3.13 $(addprefix --platform ,$(PLATFORM))

# Bytecode for the runtime's interpreter, made once here instead of at every cold
# start: /var/task and /opt are read-only, so Python can never cache what it
# compiles there. unchecked-hash: a timestamp-based .pyc records the source's
# mtime, which the zip round trip to Lambda does not keep exactly, so Python would
# find it stale and compile anyway; checked-hash would re-hash every source at
# every import. The artifact is immutable, so the source cannot change under it.
COMPILE = $(PYTHON313) -m compileall -q -j 0 --invalidation-mode unchecked-hash

SBOM = $(CYCLONEDX) requirements --pyproject $(ROOT)/pyproject.toml \
	--output-reproducible --output-format JSON

.PHONY: build-GatewayFunction build-PoliciesLayer build-BreakerFunction

# The function: run.sh and policy_gateway (everything in functions/gateway/)
# at the task root, its dependencies beside them.
build-GatewayFunction:
	cp -R ./. "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(PIP_INSTALL) --target "$(ARTIFACTS_DIR)" -r "$(LOCKS)/function-$(ARCH).txt"
	$(COMPILE) "$(ARTIFACTS_DIR)"
	echo "$(ARCH)" > "$(ARTIFACTS_DIR)/ARCHITECTURE"
	$(SBOM) -o "$(ARTIFACTS_DIR)/sbom.cdx.json" "$(LOCKS)/function-$(ARCH).txt"

# The layer: gateway_policies and any operator module beside it, with their
# dependencies, under python/ (Lambda mounts it at /opt/python).
build-PoliciesLayer:
	mkdir -p "$(ARTIFACTS_DIR)/python"
	cp -R ./. "$(ARTIFACTS_DIR)/python/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(PIP_INSTALL) --target "$(ARTIFACTS_DIR)/python" -r "$(LOCKS)/layer-$(ARCH).txt"
	$(COMPILE) "$(ARTIFACTS_DIR)/python"
	$(SBOM) -o "$(ARTIFACTS_DIR)/policies-layer.sbom.cdx.json" "$(LOCKS)/layer-$(ARCH).txt"

# The breaker: its handler package at the task root, Powertools and boto3 beside it.
build-BreakerFunction:
	cp -R ./. "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(PIP_INSTALL) --target "$(ARTIFACTS_DIR)" -r "$(LOCKS)/breaker-$(ARCH).txt"
	$(COMPILE) "$(ARTIFACTS_DIR)"
	$(SBOM) -o "$(ARTIFACTS_DIR)/sbom.cdx.json" "$(LOCKS)/breaker-$(ARCH).txt"
