# The two set-up commands of the README: `make run` (the main job on a built-in example) and
# `make test` (the whole suite). Each creates its own virtual environment in .venv. `make lint`
# (ruff, and mypy with its ratchet: .ci/typecheck.py) runs in CI too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch,lint]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/npusim run --config a3 examples/shmem_allgather.py

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check npusim tests benchmarks examples
	$(BIN)/python .ci/typecheck.py

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/sweep.py

clean:
	rm -rf $(VENV) traces/*/ .pytest_cache
