# Quick start:  make demo   (set up, then compile + estimate + a short pipelined training run)
#               make test   (set up, then run the test suite)
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: setup demo test test-all lint bench clean

$(BIN)/ppir: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: on this machine 2.13.0 is a local CPU wheel (never a CUDA download)
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[torch,viz,test]"
	touch $(BIN)/ppir

setup: $(BIN)/ppir

demo: setup
	$(BIN)/python examples/demo.py

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m "slow or not slow"

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
