# The README's two commands are `make serve` and `make test`; everything else is a step of them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
# torch goes in first, from the CPU wheel, so a plain requirement never pulls a CUDA build:
# from PyTorch's CPU index where it answers, else from pip's configured index
# (scripts/torch-index.sh; probed only when the venv is built, `=` defers it).
# GPU hosts: make TORCH_SPEC='torch==2.13.0' PIP_TORCH_ARGS='--index-url <your CUDA index>'
# The configured index alone: make PIP_TORCH_ARGS=
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_ARGS ?= $(shell PYTHON=$(PYTHON) bash scripts/torch-index.sh)
# Semgrep, the gate's scanner, in a venv of its own (deploy/semgrep.lock) so its pins and the
# app's never constrain each other; the gate finds it here, beside the app's venv, by default.
SEMGREP_VENV ?= $(VENV)-semgrep

.PHONY: serve test test-fast install install-dev semgrep system-deps sandbox-image lint typecheck bench clean

serve: install
	$(VENV)/bin/ribbit serve

# Two pytest-xdist workers, each taking a whole test module at a time in the order pytest
# collects them (its module-scoped fixtures built once, its tests in their order): the
# suite mostly waits on one process at a time, so two use a two-core machine.
# TEST_WORKERS=0 runs one process. tests/unit/test_parallel_workers.py checks the split.
TEST_WORKERS ?= 2
XDIST_ARGS = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: install-dev system-deps sandbox-image
	$(PY) -m pytest $(XDIST_ARGS) $(PYTEST_ARGS)

# The inner loop: everything but the suites marked slow (tests/plugins/tiers.py).
test-fast: install-dev system-deps sandbox-image
	$(PY) -m pytest -m 'not slow' $(XDIST_ARGS) $(PYTEST_ARGS)

$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q $(PIP_TORCH_ARGS) "$(TORCH_SPEC)"
	touch $@

# `make serve` runs an embedded worker too, so it needs the worker extra (a web-only host:
# `pip install ribbit`, then `ribbit serve --no-worker`).
$(VENV)/.installed: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e '.[worker]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e '.[dev,worker]'
	touch $@ $(VENV)/.installed

# --clear: a changed lock gives exactly its pins, not them plus the last lock's leftovers.
$(SEMGREP_VENV)/.installed: deploy/semgrep.lock
	$(PYTHON) -m venv --clear $(SEMGREP_VENV)
	$(SEMGREP_VENV)/bin/pip install -q -r deploy/semgrep.lock
	touch $@

semgrep: $(SEMGREP_VENV)/.installed
install: $(VENV)/.installed semgrep
install-dev: $(VENV)/.installed-dev semgrep

# Debian packages the tests use (Redis, Podman, bubblewrap, PostgreSQL, ...); a no-op
# when they are present or when this is not a root Debian host.
system-deps:
	bash scripts/system-deps.sh

sandbox-image: install-dev
	bash deploy/sandbox/build-image.sh --if-missing

lint:
	$(VENV)/bin/ruff check bot worker trainer tests
	$(VENV)/bin/ruff format --check bot worker trainer tests

typecheck:
	$(VENV)/bin/mypy

bench: install-dev system-deps
	$(PY) -m tests.benchmarks

clean:
	rm -rf $(VENV) $(SEMGREP_VENV) .pytest_cache .mypy_cache .ruff_cache
