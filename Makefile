# One command sets up and runs the main job (`make demo`), one sets up and runs the tests (`make test`).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: setup demo test test-slow lint format bench clean

$(BIN)/activate: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,plot,data]"
	touch $(BIN)/activate

setup: $(BIN)/activate

demo: setup
	$(BIN)/zonal demo

test: setup
	$(BIN)/python -m pytest

test-slow: setup
	$(BIN)/python -m pytest -m slow

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

format: setup
	$(BIN)/ruff format src tests benchmarks scripts
	$(BIN)/ruff check --fix src tests benchmarks scripts

bench: setup
	$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	$(BIN)/python benchmarks/harmonics.py
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/sgpr_scaling.py --quick
	$(BIN)/python benchmarks/dgp_training.py --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
