# rl_trader — set-up, training, tests.
#   make train FOLDS=3        train on the embedded S&P 500 data (creates .venv on first use)
#   make test                 run the test suite on the CPU (creates .venv on first use)
#   make convergence RUNS=5   the release gate: planted markets on fresh seeds, RUNS run seeds
#   make runs                 the runs under runs/ (or RUNS_DIR) side by side
#   make gpu-compiler         jax's CUDA plugin in .gpu-compiler/, to compile for a GPU
#                             without one (experiments/gpu_target.py; about 5 GB)
# Use an existing environment instead of .venv:  make train PYTHON=python3
# GPU: the CUDA 12 build of jax is installed when `nvidia-smi` is found, or when CUDA=1.

SHELL := /bin/bash
VENV ?= .venv
FOLDS ?= 3
PRESET ?=
EPOCHS ?=
SEED ?=
DATA ?=
RUN_DIR ?=
RUNS_DIR ?=
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

TRAIN_ARGS := --folds $(FOLDS) $(if $(PRESET),--preset $(PRESET)) \
	$(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(SEED),--seed $(SEED)) \
	$(if $(DATA),--data $(DATA)) $(if $(RUN_DIR),--run-dir $(RUN_DIR)) $(ARGS)

RUNS ?= 3
# pytest-xdist: modules spread over up to 8 CPU workers, slowest first (tests/conftest.py);
# TEST_WORKERS= runs them in one process.
TEST_WORKERS ?= -n auto --maxprocesses 8 --dist loadfile --no-loadscope-reorder

.PHONY: venv train test lint clean convergence bench report runs chromium gpu-compiler

venv: $(SETUP)

# The packages' bytecode is compiled on every core at once (pip compiles it on one: 46 s →
# 37 s for the whole install on a 2-core machine, 2026-12-02); it must be on disk, since
# PYTHONDONTWRITEBYTECODE=1 machines would otherwise compile it again in every process. The
# packages' own test suites (`test/`, `tests/` folders: never imported) are left out (22.6 s
# → 13.5 s on the 2-core machine, 2026-12-03). A package's file that does not compile (a
# template, say) is never imported: not an error.
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q --no-compile -e '.[$(EXTRAS)]'
	$(VENV)/bin/python -m compileall -q -j 0 -x '/tests?/' "$$($(VENV)/bin/python -c \
	  'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
	touch $@

train: $(SETUP)
	$(PY) -m experiments.multi_fold $(TRAIN_ARGS)

# The environment and the browser are installed side by side (one downloads wheels, the other
# Debian packages), then the suite runs.
test:
	@$(MAKE) --no-print-directory -j2 $(SETUP) chromium
	JAX_PLATFORMS=cpu $(PY) -m pytest $(TEST_WORKERS) $(PYTEST_ARGS)

# Release gate: the main job on each planted market of the family and the random walk, RUNS
# run seeds each on fresh data seeds (>= 1000, never tuned on); goals in experiments/convergence.py
# (floors overridable through ARGS, e.g. ARGS="--oracle-floor 0.8 --markets regime").
convergence: $(SETUP)
	$(PY) -m experiments.convergence --folds $(FOLDS) --runs $(RUNS) \
		$(if $(PRESET),--preset $(PRESET)) $(if $(RUN_DIR),--run-dir $(RUN_DIR)) $(ARGS)

bench: $(SETUP)
	$(PY) -m experiments.benchmark $(ARGS)

report: $(SETUP)
	$(PY) -m rl_trader.cli report $(RUN_DIR)

runs: $(SETUP)
	$(PY) -m rl_trader.cli runs $(RUNS_DIR) $(ARGS)

# Headless browser for tests/test_report.py (Debian's chromium); if it cannot be installed the
# browser test skips itself with a message and the rest of the suite still runs.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (headless browser for tests/test_report.py)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  { $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends chromium >/dev/null; } || \
	  echo "chromium could not be installed: the browser test will be skipped"; }

lint: $(SETUP)
	$(PY) -m ruff check rl_trader experiments tests

# Beside the environment, not in it: there, every jax process of a machine without a GPU
# would try the plugin's GPU first and print its failure. The plugin must match the jaxlib.
gpu-compiler: $(SETUP)
	$(PY) -m pip install -q --target .gpu-compiler \
	  "jax-cuda12-plugin[with-cuda]==$$($(PY) -c 'import jaxlib; print(jaxlib.__version__)')"

clean:
	rm -rf $(VENV) .gpu-compiler .pytest_cache build *.egg-info
