# The two set-up commands of the README: `make run` (the main job on a built-in example) and
# `make test` (the whole suite). Each creates its own virtual environment in .venv. `make lint`
# (ruff, and mypy with its ratchet: .ci/typecheck.py) runs in CI too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.compiled

.PHONY: run test explore lint bench clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch,lint]'
	touch $(STAMP)

# the engine runs compiled (setup.py: mypyc): after an edit of one of its modules, build them again
$(COMPILED): $(STAMP) npusim/engine/flow.py npusim/engine/loop.py npusim/engine/progress.py
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(COMPILED)

run: $(COMPILED)
	$(BIN)/npusim run --config a3 examples/shmem_allgather.py

test: $(COMPILED)
	$(BIN)/python -m pytest

# the suite with fresh random examples for its property tests (`make test` draws the same ones every
# run); SEED=N repeats one exploration
explore: $(COMPILED)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest $(if $(SEED),--hypothesis-seed=$(SEED))

lint: $(COMPILED)
	$(BIN)/ruff check npusim tests benchmarks examples
	$(BIN)/python .ci/typecheck.py

bench: $(COMPILED)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/sweep.py

clean:
	rm -rf $(VENV) traces/*/ .pytest_cache build
	find npusim -name '*.so' -delete
