# One-command set-up: `make demo` and `make test` install into .venv first when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS ?= 1
# torch from PyPI for x86_64 is the CUDA build (about 4-5 GB of nvidia-* wheels; a `.venv` of 7.2 GB).
# Without nvidia-smi (no NVIDIA GPU) the same pins come from PyTorch's CPU wheel index (TORCH_INDEX)
# when it can be reached, else from the default index as before (decision 0164). CPU=1 asks for the
# CPU index on any machine, CPU=0 for the default index. A PyPI wheel installed with --no-deps does
# not import (libcudnn.so.9 and ten other CUDA libraries missing; decision 0053): no way out.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
ifeq ($(origin CPU),undefined)
CPU := $(if $(shell command -v nvidia-smi 2>/dev/null),0,1)
CPU_WHY := no nvidia-smi here
else
CPU_WHY := CPU=$(CPU)
endif

.PHONY: install demo test test-fast bench bench-paper gpu-check lint clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
ifeq ($(CPU),1)
	@echo "make: $(CPU_WHY): the CPU build of torch from $(TORCH_INDEX) (CPU=0 installs PyPI's CUDA build)"
	if $(BIN)/python scripts/url_reachable.py $(TORCH_INDEX)/; then \
	  $(BIN)/pip install --quiet --index-url $(TORCH_INDEX) $(TORCH_PINS); \
	else \
	  echo "make: $(TORCH_INDEX) cannot be reached; $(TORCH_PINS) from the default index instead (on PyPI the CUDA build, 4-5 GB more)"; \
	  $(BIN)/pip install --quiet $(TORCH_PINS); \
	fi
else
	$(BIN)/pip install --quiet $(TORCH_PINS)
endif
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps medmnistc==0.1.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/crs demo

# The suite runs on every core (pytest-xdist, at most 4 workers); a whole file per worker keeps each
# module's fixtures built once. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))" 2>/dev/null || echo 2)
test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

# `make bench PAPER_SCALE=1` (or `make bench-paper`) adds the paper-scale stage-2 benchmark: about
# 6.6 GB of disk per encoder, deleted at the end; PAPER_ENCODERS sets how many encoders it generates.
PAPER_ENCODERS ?= 2
bench: $(STAMP)
	$(BIN)/crs bench all
ifeq ($(PAPER_SCALE),1)
	$(BIN)/crs bench paper-scale --encoders $(PAPER_ENCODERS)
endif

bench-paper: $(STAMP)
	$(BIN)/crs bench paper-scale --encoders $(PAPER_ENCODERS)

# On a GPU machine: extraction, corruption suites and probe backends on the device (scripts/gpu_check.sh).
gpu-check: $(STAMP)
	PYTHON=$(BIN)/python scripts/gpu_check.sh

lint: $(STAMP)
	$(BIN)/ruff check crs tests
	$(BIN)/mypy crs
	$(BIN)/lint-imports --no-cache --no-logo

clean:
	rm -rf crs-out .pytest_cache .ruff_cache .mypy_cache build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	@echo "cache/ kept (features are expensive); remove it by hand with: rm -rf cache/*.zarr"
