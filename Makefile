# Two commands on a fresh machine:
#   make run    set up and run the main job (the full report) on the built-in default data
#   make test   set up and run the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
export NUMBA_CACHE_DIR ?= $(CURDIR)/.numba_cache

.PHONY: run run-quick test setup setup-dev lint clean

# torch==2.13.0 first: it is the local CPU build; a bare "torch" would pull a CUDA build
$(VENV)/.stamp-base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[plot,stats,torch]"
	touch $@

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install -q -e ".[dev,flower]"
	touch $@

setup: $(VENV)/.stamp-base
setup-dev: $(VENV)/.stamp-dev

run: setup
	$(VENV)/bin/convexfl report --out convexfl-report

run-quick: setup
	$(VENV)/bin/convexfl report --quick --out convexfl-report-quick

test: setup-dev
	$(PY) -m pytest -q

lint: setup-dev
	$(VENV)/bin/ruff check convexfl tests theory_checks benchmarks

clean:
	rm -rf $(VENV) .numba_cache .pytest_cache .hypothesis
