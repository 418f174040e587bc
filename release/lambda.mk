# `sam build` runs this (template.yaml: BuildMethod makefile, ContextPath
# release/<Architecture>) for the function and the policies layer. It installs
# their dependencies from the hash-pinned locks only: Linux wheels for the
# Lambda runtime's Python and the chosen architecture, every file checked
# against the lock's sha256, nothing built from source. Each artifact gets a
# CycloneDX SBOM beside its code (README: "What ships").
#
# SAM sets ARTIFACTS_DIR and runs make in a scratch copy of the CodeUri /
# ContentUri directory; release/<arch>/Makefile sets ARCH and includes this.

RELEASE := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
ROOT := $(abspath $(RELEASE)/..)
LOCKS := $(ROOT)/locks
# The runtime's interpreter (template.yaml: Runtime), as `sam build` needs it.
PYTHON313 ?= python3.13
# The SBOM tool comes with the dev dependencies; any cyclonedx-py on PATH will do.
CYCLONEDX ?= $(or $(shell command -v cyclonedx-py),$(ROOT)/.venv/bin/cyclonedx-py)
PLATFORM_arm64 := manylinux2014_aarch64
PLATFORM_x86_64 := manylinux2014_x86_64
PLATFORM := $(PLATFORM_$(ARCH))

ifeq ($(PLATFORM),)
$(error ARCH must be arm64 or x86_64, not "$(ARCH)")
endif

# --only-binary and --platform: the wheels Lambda runs, never the build
# machine's; --require-hashes: every file is the one the lock names.
PIP_INSTALL = $(PYTHON313) -m pip install --quiet --disable-pip-version-check \
	--require-hashes --only-binary=:all: --no-compile \
	--implementation cp --python-version 3.13 --platform $(PLATFORM)

SBOM = $(CYCLONEDX) requirements --pyproject $(ROOT)/pyproject.toml \
	--output-reproducible --output-format JSON

.PHONY: build-GatewayFunction build-PoliciesLayer

# The function: run.sh and policy_gateway (everything in functions/gateway/)
# at the task root, its dependencies beside them.
build-GatewayFunction:
	cp -R ./. "$(ARTIFACTS_DIR)/"
	$(PIP_INSTALL) --target "$(ARTIFACTS_DIR)" -r "$(LOCKS)/function-$(ARCH).txt"
	echo "$(ARCH)" > "$(ARTIFACTS_DIR)/ARCHITECTURE"
	$(SBOM) -o "$(ARTIFACTS_DIR)/sbom.cdx.json" "$(LOCKS)/function-$(ARCH).txt"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

# The layer: gateway_policies and any operator module beside it, with their
# dependencies, under python/ (Lambda mounts it at /opt/python).
build-PoliciesLayer:
	mkdir -p "$(ARTIFACTS_DIR)/python"
	cp -R ./. "$(ARTIFACTS_DIR)/python/"
	$(PIP_INSTALL) --target "$(ARTIFACTS_DIR)/python" -r "$(LOCKS)/layer-$(ARCH).txt"
	$(SBOM) -o "$(ARTIFACTS_DIR)/policies-layer.sbom.cdx.json" "$(LOCKS)/layer-$(ARCH).txt"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
