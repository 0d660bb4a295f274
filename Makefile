# The two commands a newcomer needs; each installs what it needs into .venv first.
#   make run    the local stack on embedded defaults, fed with sample conversations
#   make test   the whole test suite on real PostgreSQL+pgvector, Redis, worker and beat
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=

.PHONY: run test install install-test clean

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

clean:
	rm -rf .hindsight
