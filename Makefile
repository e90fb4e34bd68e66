# infergauge — the README's commands: make demo | make test | make bench
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_SECONDS ?= 30
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck pytest bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

## demo: run loadgen for ~30 s against the embedded simulated engine, print where results went
demo: $(STAMP)
	$(BIN)/loadgen run --target sim --rate 8 --duration $(DEMO_SECONDS) --profile medium --linger 0 --results-dir results

## test: lint, type-check, then the whole test suite
test: lint typecheck pytest

LINTED := infergauge loadgen simengine exporter bench tests grafana

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

typecheck: $(STAMP)
	$(BIN)/mypy infergauge loadgen simengine exporter grafana/dashgen

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

## bench: our own speed and accuracy, printed as figures (not tests)
bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
