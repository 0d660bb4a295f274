# The two commands a newcomer needs; each installs what it needs into .venv first.
#   make run        the local stack on embedded defaults, fed with sample conversations
#   make test       the whole test suite on real PostgreSQL+pgvector, Redis, worker and beat (CI runs this: .ci/run)
# and one for the inner loop:
#   make test-fast  the pure and in-process service tests (still on real PostgreSQL+pgvector and Redis); it deselects
#                   the markers in FAST_LANE (declared in pyproject.toml): tests that use the stack's worker, beat and
#                   API processes (e2e), the fault suite, the API fuzzing, the eval suites and the slow tests.
# ARGS goes to pytest in both test lanes, e.g. make test-fast ARGS="-x tests/recall".
#   make lint       ruff (lint and format) and mypy with the strict flags of pyproject.toml; CI runs it first
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
FAST_LANE := not e2e and not faults and not fuzz and not eval and not slow

.PHONY: run test test-fast lint install clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU build, so sentence-transformers does not pull a multi-GB CUDA build
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/hindsight up $(ARGS)

test: install
	HF_HUB_OFFLINE=1 $(PY) -m pytest $(ARGS)

test-fast: install
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "$(FAST_LANE)" $(ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf .hindsight
