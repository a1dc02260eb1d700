# One-command set-up: `make demo` and `make test` install into .venv first when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS ?= 1

.PHONY: install demo test test-fast bench lint clean

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

bench: $(STAMP)
	$(BIN)/crs bench all

lint: $(STAMP)
	$(BIN)/ruff check crs tests
	$(BIN)/mypy crs
	$(BIN)/lint-imports --no-cache --no-logo

clean:
	rm -rf crs-out .pytest_cache .ruff_cache .mypy_cache build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	@echo "cache/ kept (features are expensive); remove it by hand with: rm -rf cache/*.zarr"
