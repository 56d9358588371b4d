# One entry point. Every target bootstraps what it needs: a .venv, the build
# tools and test packages from PyPI, and the Rust extension built by maturin.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
DEPS := $(VENV)/.deps-installed
EXTRAS ?= test lint
PYTEST_ARGS ?=
BENCH_ARGS ?=

export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(BIN):$(PATH)

.PHONY: run test test-rust test-python test-crash lint bench develop wheel clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Installs the build tool and the extras named in pyproject.toml (one list of
# dependencies, kept there), again whenever pyproject.toml changes.
$(DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip 'maturin>=1.9.4,<2'
	$(PY) -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
	  print('\n'.join(r for e in '$(EXTRAS)'.split() for r in d[e]))" > $(VENV)/requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements.txt
	touch $@

# Release profile throughout: tests drive real volumes through the extension.
develop: $(DEPS)
	$(BIN)/maturin develop --release --quiet

# The main job: a Spark Structured Streaming pipeline on an embedded store
# (pyspark comes with the test extra that develop installs).
run: develop
	$(PY) examples/pipeline.py

test: test-rust test-python

test-rust:
	cargo test --quiet --workspace

test-python: develop
	$(PY) -m pytest $(PYTEST_ARGS)

# The kill -9 crash loops alone.
test-crash: develop
	$(PY) -m pytest -m crash $(PYTEST_ARGS)

lint: develop
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests benches examples
	$(BIN)/ruff format --check python tests benches examples
	$(PY) -m mypy python/seglog
	$(PY) -m mypy.stubtest seglog._native

bench: develop $(VENV)/.bench-installed
	OPENBLAS_NUM_THREADS=1 $(PY) benches/run.py $(BENCH_ARGS)

$(VENV)/.bench-installed: pyproject.toml | $(PY)
	$(PY) -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
	  print('\n'.join(d['bench']))" > $(VENV)/bench-requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/bench-requirements.txt
	touch $@

wheel: $(DEPS)
	$(BIN)/maturin build --release --strip --out dist

clean:
	rm -rf $(VENV) target dist
