# Two entry points on a fresh machine: `make bench` (the main job) and `make test`.
# Both create (or reuse) the virtual environment in .venv and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

$(STAMP): requirements.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	TVM_NUM_THREADS=2 $(PY) -m pytest -n 2 -q tests

bench: $(STAMP)
	TVM_NUM_THREADS=$$(nproc) $(PY) examples/spmm_csr.py

.PHONY: venv test bench
