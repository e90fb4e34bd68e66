# infergauge — the README's commands: make demo | make test | make bench
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_SECONDS ?= 30
DEMO_RESULTS ?= results
FREE_PORT = $(BIN)/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
PYTEST_ARGS ?=
# system packages the tests need, as debian-package:command (postgresql: for the baselines store)
DEPS ?= prometheus:promtool docker-compose:docker-compose postgresql:pg_ctl systemd:systemd-analyze

.PHONY: demo test deps lint typecheck docs pytest bench venv clean llamacpp

venv: $(STAMP)

# the C sources too: an editable install builds the extensions once, so an edit needs a reinstall
$(STAMP): pyproject.toml loadgen/transport/_kread.c loadgen/transport/_sse.c loadgen/_sortq.c \
		loadgen/_json.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m loadgen.cli.codecache >/dev/null
	touch $(STAMP)

## demo: run loadgen for ~30 s against the embedded simulated engine, print where results went
## (live metrics on a free port, printed first: the demo needs no fixed port)
demo: $(STAMP)
	@port=$$($(FREE_PORT)) && echo "live metrics: http://127.0.0.1:$$port/metrics (while the demo runs)" && \
	$(BIN)/loadgen run --target sim --rate 8 --duration $(DEMO_SECONDS) --profile medium --linger 0 \
		--metrics-port $$port --results-dir $(DEMO_RESULTS)

## test: system packages (make deps), lint, type-check, the docs site, then the whole test suite
test: deps lint typecheck docs pytest

## deps: install the missing Debian packages of DEPS with apt-get when root, else name them and stop
deps:
	@bash .ci/deps $(DEPS)

LINTED := infergauge loadgen simengine exporter bench tests grafana

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

typecheck: $(STAMP)
	$(BIN)/mypy infergauge loadgen simengine exporter grafana/dashgen

## docs: the documentation site (docs/, mkdocs.yml) into site/; --strict: a broken link or anchor, or a
## page missing from the nav, fails the build
DOCS_SITE ?= site
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet -d $(DOCS_SITE)

pytest: deps $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

## llamacpp: build llama.cpp's llama-server from source for the CPU (~10-20 min) into ~/.cache, so
## tests/integration/test_engines_real_llamacpp.py runs against the real server instead of skipping
llamacpp: $(STAMP)
	PYTHON=$(BIN)/python bash .ci/build-llamacpp

## bench: our own speed and accuracy, printed as figures (not tests)
bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache site
