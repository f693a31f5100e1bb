# One command sets up and runs the main job (`make demo`), one sets up and runs the tests (`make test`).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup docs-setup demo test test-slow test-docs test-wheel docs lint format bench clean

$(BIN)/activate: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,plot,data]"
	touch $(BIN)/activate

setup: $(BIN)/activate

# the docs extra (Sphinx and friends) and Debian's chromium for the browser check of the site
$(VENV)/.docs-installed: $(BIN)/activate
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,plot,data,docs]"
	touch $@

docs-setup: $(VENV)/.docs-installed
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }

demo: setup
	$(BIN)/zonal demo

test: setup
	$(BIN)/python -m pytest

test-slow: setup
	$(BIN)/python -m pytest -m slow

# builds the wheel and sdist into dist/, installs the wheel (with its dependencies, pinned) into a
# fresh venv outside the checkout and runs scripts/smoke_test.py there
test-wheel: setup
	rm -rf dist
	$(BIN)/python -m build --no-isolation -o dist .
	smoke=$$(mktemp -d) && $(PYTHON) -m venv $$smoke/venv && \
		$$smoke/venv/bin/pip install -q -c constraints.txt "$$(ls dist/zonal-*.whl)[data,sklearn,bo]" && \
		cd $$smoke && $$smoke/venv/bin/python $(CURDIR)/scripts/smoke_test.py && rm -rf $$smoke

# the site with warnings as errors, tutorials executed, into docs/_build/html
docs: $(VENV)/.docs-installed
	$(BIN)/sphinx-build -W --keep-going -b html -q docs docs/_build/html

# builds the site and checks it in headless Chromium (screenshots under docs/_build/screenshots)
test-docs: docs-setup
	$(BIN)/python -m pytest -m docs

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts docs/conf.py docs/tutorials
	$(BIN)/ruff format --check src tests benchmarks scripts docs/conf.py docs/tutorials
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format src tests benchmarks scripts docs/conf.py docs/tutorials
	$(BIN)/ruff check --fix src tests benchmarks scripts docs/conf.py docs/tutorials

bench: setup
	$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	$(BIN)/python benchmarks/harmonics.py
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/sgpr_scaling.py --quick
	$(BIN)/python benchmarks/dgp_training.py --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .mypy_cache docs/_build \
		docs/auto_tutorials
