# rl_trader — set-up, training, tests.
#   make train FOLDS=3        train on the embedded S&P 500 data (creates .venv on first use)
#   make test                 run the test suite on the CPU (creates .venv on first use)
# Use an existing environment instead of .venv:  make train PYTHON=python3
# GPU: the CUDA 12 build of jax is installed when `nvidia-smi` is found, or when CUDA=1.

SHELL := /bin/bash
VENV ?= .venv
FOLDS ?= 3
PRESET ?= default
EPOCHS ?=
SEED ?=
DATA ?=
RUN_DIR ?=
ARGS ?=

ifdef PYTHON
PY := $(PYTHON)
SETUP :=
else
PY := $(VENV)/bin/python
SETUP := $(VENV)/.installed
endif

CUDA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
comma := ,
EXTRAS := dev$(if $(filter 1,$(CUDA)),$(comma)cuda12)

export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

TRAIN_ARGS := --folds $(FOLDS) --preset $(PRESET) \
	$(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(SEED),--seed $(SEED)) \
	$(if $(DATA),--data $(DATA)) $(if $(RUN_DIR),--run-dir $(RUN_DIR)) $(ARGS)

.PHONY: venv train test lint clean

venv: $(SETUP)

$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

train: $(SETUP)
	$(PY) -m experiments.multi_fold $(TRAIN_ARGS)

test: $(SETUP)
	JAX_PLATFORMS=cpu $(PY) -m pytest $(PYTEST_ARGS)

lint: $(SETUP)
	$(PY) -m ruff check rl_trader experiments tests

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
