# One-command set-up: `make demo` and `make test` install into .venv first when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS ?= 1

.PHONY: install demo test test-fast bench bench-paper gpu-check lint clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps medmnistc==0.1.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/crs demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

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
