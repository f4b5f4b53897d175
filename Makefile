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

# Ops' commonest kernels compiled for x86-64-v3 (sparsetir.prebuild; docs/cold-start.md),
# shipped in the wheel as package data: python/sparsetir/prebuilt/ (not in git).
prebuilt: $(STAMP)
	PYTHONPATH=$(CURDIR)/python TVM_NUM_THREADS=2 $(PY) -m sparsetir.prebuild python/sparsetir/prebuilt

# The package as users install it: a wheel from `python -m build` and a plain `pip install .`,
# each into a fresh environment, smoke-tested from outside the source tree (with the prebuilt
# kernels, which the smoke test loads without compiling).
PKG_VENV := .pkg-venv
package-test: $(STAMP) prebuilt
	rm -rf build dist $(PKG_VENV)
	$(PY) -m build --wheel --outdir dist . > /dev/null
	ls -l dist/sparsetir-*.whl
	$(PYTHON) -m venv $(PKG_VENV)
	$(PKG_VENV)/bin/pip install -q dist/sparsetir-*.whl
	cd /tmp && $(CURDIR)/$(PKG_VENV)/bin/python $(CURDIR)/tests/packaging/smoke.py
	$(PKG_VENV)/bin/pip install -q --force-reinstall --no-deps .
	cd /tmp && $(CURDIR)/$(PKG_VENV)/bin/python $(CURDIR)/tests/packaging/smoke.py
	rm -rf build

# The main job: SpMM / SDDMM against DGL, torch.sparse, scipy, MKL and GraphBLAS
# (benchmarks/bench.py; results in benchmarks/results/). BENCH_ARGS=--quick or --large.
# Then end-to-end GNN training against DGL and PyG (benchmarks/gnn.py, alone: `make bench-gnn`;
# docs/gnn-benchmark.md). GNN_ARGS=--quick (GCN on cora) or e.g. "--models sage --graphs pubmed";
# BENCH_ARGS=--quick makes the GNN part quick too, unless GNN_ARGS says otherwise.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) benchmarks/requirements.txt
	$(VENV)/bin/pip install -q -r benchmarks/requirements.txt
	touch $(BENCH_STAMP)

BENCH_ARGS ?=
GNN_ARGS ?=
bench: $(BENCH_STAMP)
	MKL_RT=$$(ls $(CURDIR)/$(VENV)/lib/libmkl_rt.so* | tail -1) \
	LD_LIBRARY_PATH=$(CURDIR)/$(VENV)/lib:$$LD_LIBRARY_PATH \
	$(PY) benchmarks/bench.py $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-gnn \
	  GNN_ARGS="$(or $(GNN_ARGS),$(if $(findstring --quick,$(BENCH_ARGS)),--quick))"

bench-gnn: $(BENCH_STAMP)
	$(PY) benchmarks/gnn.py $(GNN_ARGS)

# GCN and GraphSAGE on cora and pubmed: test accuracy and epoch time in float32 and under
# bfloat16 autocast (benchmarks/gnn_accuracy.py; docs/half-precision.md). E.g.
# ACCURACY_ARGS="--models gcn --graphs cora".
ACCURACY_ARGS ?=
bench-gnn-accuracy: $(STAMP)
	TVM_NUM_THREADS=$${TVM_NUM_THREADS:-1} $(PY) benchmarks/gnn_accuracy.py $(ACCURACY_ARGS)

# The folder for a GPU machine (benchmarks/gpu/package.py: runtime-only, no TVM there); on the
# GPU machine: `sh build/gpu_bundle/device_run.sh OUT_DIR` (docs/benchmark.md, its README).
GPU_ARCH ?= sm_90
gpu-bundle: $(STAMP)
	$(PY) benchmarks/gpu/package.py --out build/gpu_bundle --arch $(GPU_ARCH)
	$(PY) build/gpu_bundle/run.py --selftest-cpu

.PHONY: venv test bench bench-gnn bench-gnn-accuracy package-test gpu-bundle prebuilt
