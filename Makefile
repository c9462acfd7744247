# sglbench: two commands for a newcomer.
#   make demo   set up, then run the main job on the embedded default (sim host)
#   make test   set up, then run every test (unit, lint, Molecule, sim host, and the real-SGLang tier
#               where this machine can run it) in parallel lanes, ending in one line per lane and the total
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
export PATH := $(BIN):$(PATH)
export CONTAINERS_CONF := $(CURDIR)/build/podman/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help setup venv sysdeps podman-conf image demo test test-fast lint clean real-sglang test-real

help:
	@echo "make demo   - set up and run the sim-host campaign (bench.yml -i inventory/sim -e tp=1)"
	@echo "              SGLBENCH_DEMO_HOSTS=2 make demo: one campaign on two sim hosts at once (inventory/simpair)"
	@echo "make test   - set up and run every test (unit, lint, Molecule, real-SGLang tier when possible)"
	@echo "make lint   - ansible-lint (production, offline), yamllint, ruff"
	@echo "make image  - build the sim host container image if missing"
	@echo "make real-sglang - set up the pinned real SGLang on the CPU (~11 GB, cached outside the tree)"
	@echo "make test-real   - the real-SGLang tier alone: the real server, bench.yml on the real-SGLang sim host"

venv: $(VENV)/.installed

# Re-install when the project's dependencies change.
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

sysdeps:
	@scripts/install-sysdeps.sh

podman-conf: sysdeps
	@scripts/podman-env.sh >/dev/null

image: podman-conf
	@mkdir -p build
	@scripts/simhost-image.sh > build/simhost-image.txt
	@echo "sim host image: $$(tail -n 1 build/simhost-image.txt)"

setup: venv image

# Every test in parallel lanes (scripts/test-lanes.sh): units, real, Molecule, sim host campaigns, fault
# injection. The real lane runs the contract suite and the real-SGLang tier (tests/real, tests/contract's
# real side, docs/real-sglang.md) when scripts/real-sglang/tier.sh says this machine can run it (root, gcc, >= 16 GB free: it
# sets the env up meanwhile, ~3 min cold, cached outside the tree); otherwise that script prints one line
# saying why it is skipped. A failed set-up fails `make test` after the other tests ran.
test: setup
	@scripts/test-lanes.sh $(BIN)/python

# Everything except Molecule and the sim-host tests (no containers).
test-fast: venv
	$(BIN)/python -m pytest -m "not molecule and not simhost"

lint: venv
	$(BIN)/python -m pytest -m lint

# The real SGLang (pinned, PyPI) serving tiny models on the CPU, cached outside the work tree
# (~11 GB, ~3-4 min cold, <1 s when in place). Exit 3 = cannot run on this machine.
real-sglang:
	@scripts/real-sglang-env.sh

# The real-SGLang tier alone (also part of `make test`): one real server on this machine (tests/real/
# test_real_server.py), then bench.yml against the real-SGLang sim host (test_realsim_bench.py).
test-real: setup
	@real="$$(scripts/real-sglang/tier.sh)" || exit 1; \
	if [ "$$real" = 1 ]; then \
	  SGLBENCH_REAL_TIER=1 SGLBENCH_SIMHOST_IMAGE="$$(tail -n 1 build/simhost-image.txt)" $(BIN)/python -m pytest -m real; \
	fi

demo: setup
	SGLBENCH_SIMHOST_IMAGE="$$(tail -n 1 build/simhost-image.txt)" scripts/demo.sh

clean:
	rm -rf build .pytest_cache .ruff_cache
