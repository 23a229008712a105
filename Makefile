# The two set-up commands of the README: `make run` (the main job on a built-in example) and
# `make test` (the whole suite), each in the virtual environment .venv, which they create.
# `make run` installs only what `npusim run` needs and compiles the engine once; `make test` (and
# `make lint`, which CI runs too: ruff, and mypy with its ratchet, .ci/typecheck.py) install the
# extras on top. What each installs is read from pyproject.toml (.ci/requirements.py).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_DEPS := $(VENV)/.run-deps
COMPILED := $(VENV)/.compiled
BYTECODE := $(VENV)/.bytecode
TEST_DEPS := $(VENV)/.test-deps
LINT_DEPS := $(VENV)/.lint-deps
SOURCES := $(shell find npusim examples -name '*.py')
# the sources of the modules the build compiles: npusim.engine.COMPILED (npusim/engine/__init__.py,
# on one line: engine.flow -> npusim/engine/flow.py), which setup.py reads too
COMPILED_SOURCES := $(shell sed -n 's/^COMPILED = (\(.*\))$$/\1/p' npusim/engine/__init__.py | tr -d '",' | tr . / | sed 's|[^ ][^ ]*|npusim/&.py|g')

.PHONY: run test explore lint bench golden clean

# python, then the dependencies of `npusim run` and of the engine's build (mypy, setuptools), and no
# more: torch, pyarrow and the test tools are the extras `make test` adds
$(RUN_DEPS): pyproject.toml
	@echo "make: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PYTHON) .ci/requirements.py build run > $(VENV)/requirements-run.txt
	@echo "make: installing what npusim run needs (simpy numpy pydantic rich matplotlib ...) and the engine's compiler (mypy)"
	$(BIN)/pip install --progress-bar off -r $(VENV)/requirements-run.txt
	touch $@

# npusim itself, editable, its engine compiled once (setup.py: mypyc, then the C compiler) into the
# package npusim_compiled in .venv, never into the checkout; again after an edit of one of the
# compiled modules (COMPILED_SOURCES), of their list or of setup.py. pip shows the build's output only when it fails: the engine says which it is
# (compiled, or interpreted and why: no C compiler ...) in one line after. The rm takes away the
# compiled files that builds before 2026-12 wrote beside the sources (npusim.engine refuses them).
$(COMPILED): $(RUN_DEPS) setup.py npusim/engine/__init__.py $(COMPILED_SOURCES)
	@echo "make: compiling the engine ($(COMPILED_SOURCES)) with mypyc and the C compiler"
	rm -f npusim/engine/*.so npusim/engine/built_from.py
	$(BIN)/pip install --progress-bar off --no-build-isolation --no-deps -e .
	@$(BIN)/python -m npusim.engine
	touch $@

# the modules' bytecode, written once here (an editable install writes none): where
# PYTHONDONTWRITEBYTECODE is set, as on the machines this project is built on, Python would otherwise
# compile every module again at every command, ~0.4 s of each `npusim run` (benchmarks/RESULTS.md,
# round 8); compileall writes only what is stale, and Python ignores a .pyc older than its source
$(BYTECODE): $(COMPILED) $(SOURCES)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q npusim examples
	touch $@

$(TEST_DEPS): $(RUN_DEPS) pyproject.toml
	$(PYTHON) .ci/requirements.py test torch > $(VENV)/requirements-test.txt
	@echo "make: installing the test suite's extras (pytest hypothesis pandas dask pyarrow torch ...)"
	$(BIN)/pip install --progress-bar off -r $(VENV)/requirements-test.txt
	touch $@

$(LINT_DEPS): $(RUN_DEPS) pyproject.toml
	$(PYTHON) .ci/requirements.py lint > $(VENV)/requirements-lint.txt
	@echo "make: installing the linter and the type checker (ruff mypy)"
	$(BIN)/pip install --progress-bar off -r $(VENV)/requirements-lint.txt
	touch $@

run: $(BYTECODE)
	@echo "make: simulating a PyPTO shmem all-gather on the 16 dies of an Atlas A3 node"
	$(BIN)/npusim run --config a3 examples/shmem_allgather.py

# on every core (pytest-xdist), the tests of a module on one of them, so that a module's costly
# fixture is made once (docs/architecture.md, "Determinism")
PARALLEL := -n auto --dist loadscope

test: $(BYTECODE) $(TEST_DEPS)
	$(BIN)/python -m pytest -q $(PARALLEL)

# the suite with fresh random examples for its property tests (`make test` draws the same ones every
# run); SEED=N repeats one exploration
explore: $(BYTECODE) $(TEST_DEPS)
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -q $(PARALLEL) $(if $(SEED),--hypothesis-seed=$(SEED))

# the identity gate's digests (tests/golden), written anew: only for a change that means to move
# outputs, timing or trace bytes, said in its commit message
golden: $(BYTECODE) $(TEST_DEPS)
	$(BIN)/python -m tests.golden.update

lint: $(BYTECODE) $(LINT_DEPS) $(TEST_DEPS)
	$(BIN)/ruff check npusim tests benchmarks examples
	$(BIN)/python .ci/typecheck.py

bench: $(BYTECODE) $(TEST_DEPS)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/sweep.py

clean:
	rm -rf $(VENV) traces/*/ .pytest_cache build
	rm -f npusim/engine/*.so npusim/engine/built_from.py
	find npusim examples -name __pycache__ -prune -exec rm -rf {} +
