# The two commands a new user needs: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE := .convoy/example

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check convoy_batch tests bench
	$(BIN)/ruff format --check convoy_batch tests bench
	$(BIN)/mypy convoy_batch

test: lint
	$(BIN)/pytest

run: $(STAMP)
	$(BIN)/python scripts/run_example.py $(EXAMPLE)

bench: $(STAMP)
	$(BIN)/python bench/tick.py

clean:
	rm -rf $(VENV) .convoy .pytest_cache .mypy_cache .ruff_cache
