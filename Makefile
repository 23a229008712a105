# The two set-up commands of the README: `make run` (the main job on a built-in example) and
# `make test` (the whole suite). Each creates its own virtual environment in .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/npusim run --config a3 examples/shmem_allgather.py

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/sweep.py

clean:
	rm -rf $(VENV) traces/*/ .pytest_cache
