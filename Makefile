# Quick start:  make demo   (set up, then compile + estimate + a short pipelined training run)
#               make test   (set up, then run the test suite)
#               make lint   (set up, then the checks CI runs first: ruff format --check, ruff check)
# `make` sets up a development environment: ppir with the 'dev' extra (torch, plots, the test
# tools, ruff, build, playwright).  Users install only the extra they need (see README).
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: setup demo test test-all lint bench clean fresh-venv-check

$(BIN)/ppir: pyproject.toml
	$(PY) -m venv $(VENV)
	# torch first, pinned, for CPU: a local wheel when pip has one, else PyTorch's CPU index
	bash .ci/install_torch.sh $(BIN)/pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(BIN)/ppir

setup: $(BIN)/ppir

# The main job: verify a schedule, estimate it, then train a small GPT with it on 4 CPU
# processes (gloo), checking the first step's gradients against single-process training.
demo: setup
	$(BIN)/ppir check interleaved_1f1b -D P=4 -D M=8 -D v=2
	$(BIN)/ppir compile interleaved_1f1b -D P=4 -D M=8 -D v=2 --backend cost
	$(BIN)/ppir launch -n 4 interleaved_1f1b -D M=8 -D v=2 --module examples/gpt_model.py \
	    --steps 30 --verify-grads

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m "slow or not slow"

# A fresh venv with only torch and ppir[torch] launches 2 ranks with --verify-grads (CI runs it).
fresh-venv-check:
	PY=$(PY) bash .ci/fresh_venv_launch.sh

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_overlap.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
