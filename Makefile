# The two commands of the README's quick start:
#   make serve   creates .venv, installs the engine, runs `engine serve` on SQLite
#   make test    creates .venv, installs the engine with test extras, runs the tests
# Both install what they need on a fresh machine (python3 with venv).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test lint typecheck check bench mutation clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

serve: $(BIN)/.installed
	$(BIN)/engine serve

check: $(BIN)/.installed
	$(BIN)/engine check

# pytest exits 5 when it collected no tests: that is a failure here, never a pass.
# Three workers (pytest-xdist) on two cores: most acceptance tests wait on
# subprocesses, so a third worker fills the time they wait (docs/testing.md).
# PYTEST_ARGS replaces this default.
PYTEST_ARGS ?= -n 3
test: $(BIN)/.installed
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: no tests were collected" >&2; exit 1; fi; exit $$rc

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy

bench: $(BIN)/.installed
	$(BIN)/python bench/check.py

# Test strength: mutants of the pure modules the unit tests must kill (docs/testing.md).
# MUTATION_ARGS="--sample 200" for a quicker, reproducible sample.
mutation: $(BIN)/.installed
	$(BIN)/python tests/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
