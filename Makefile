# The two set-up commands of the README: `make run` (the main job on a built-in example) and
# `make test` (the whole suite). Each creates its own virtual environment in .venv. `make lint`
# (ruff, and mypy with its ratchet: .ci/typecheck.py) runs in CI too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.compiled
BYTECODE := $(VENV)/.bytecode
SOURCES := $(shell find npusim examples -name '*.py')

.PHONY: run test explore lint bench golden clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch,lint]'
	touch $(STAMP)

# the engine runs compiled (setup.py: mypyc): after an edit of one of its modules, build them again
$(COMPILED): $(STAMP) npusim/engine/flow.py npusim/engine/loop.py npusim/engine/progress.py
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(COMPILED)

# the modules' bytecode, written once here (an editable install writes none): where
# PYTHONDONTWRITEBYTECODE is set, as on the machines this project is built on, Python would otherwise
# compile every module again at every command, ~0.4 s of each `npusim run` (benchmarks/RESULTS.md,
# round 8); compileall writes only what is stale, and Python ignores a .pyc older than its source
$(BYTECODE): $(COMPILED) $(SOURCES)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q npusim examples
	touch $(BYTECODE)

run: $(BYTECODE)
	$(BIN)/npusim run --config a3 examples/shmem_allgather.py

test: $(BYTECODE)
	$(BIN)/python -m pytest -q

# the suite with fresh random examples for its property tests (`make test` draws the same ones every
# run); SEED=N repeats one exploration
explore: $(BYTECODE)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -q $(if $(SEED),--hypothesis-seed=$(SEED))

# the identity gate's digests (tests/golden), written anew: only for a change that means to move
# outputs, timing or trace bytes, said in its commit message
golden: $(BYTECODE)
	$(BIN)/python -m tests.golden.update

lint: $(BYTECODE)
	$(BIN)/ruff check npusim tests benchmarks examples
	$(BIN)/python .ci/typecheck.py

bench: $(BYTECODE)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/sweep.py

clean:
	rm -rf $(VENV) traces/*/ .pytest_cache build
	find npusim -name '*.so' -delete
	rm -f npusim/engine/built_from.py
	find npusim examples -name __pycache__ -prune -exec rm -rf {} +
