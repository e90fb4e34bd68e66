# infergauge image: the exporter (default command), the simulated engine and loadgen, one image.
#   docker build -t infergauge:0.1.0 .
# NVML comes from the host driver: run the exporter with the NVIDIA container toolkit (compose's `gpu`
# profile reserves the GPUs; the default profile's exporter runs without them and reports no GPU).
# The base image is pinned to an exact Python release; docs/compose.md says how to move it.
# tests/integration/test_deploy_image.py builds the wheel from this file's COPY lines and the
# .dockerignore'd context without Docker, installs it and runs every command's --help.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# Stage 1: the wheel, from exactly what the package is made of (pyproject's packages + build hook).
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md MANIFEST.in build_hooks.py ./
COPY infergauge ./infergauge
COPY loadgen ./loadgen
COPY simengine ./simengine
COPY exporter ./exporter
# a C compiler for the raw client's C reader (loadgen/transport/_kread.c; optional: without it the
# wheel reads in Python); the runtime stage below gets the wheel, not the compiler
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
RUN pip wheel --no-deps --wheel-dir /wheels .

# Stage 2: the runtime, the wheel installed with its dependencies; no source tree, no build tools.
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib
COPY --from=wheel /wheels /wheels
# the dataclass code cache beside the installed bytecode (loadgen.cli.codecache): the image writes no
# bytecode at run time and runs as a user who could not, so every run would compile it again
RUN pip install /wheels/*.whl && rm -rf /wheels \
    && python -m loadgen.cli.codecache \
    && groupadd --system --gid 10001 infergauge \
    && useradd --system --uid 10001 --gid 10001 --no-create-home infergauge \
    && mkdir -p /work/results && chown -R 10001:10001 /work
# `loadgen grafana push` finds the dashboards here
COPY grafana/dashboards /opt/infergauge/grafana/dashboards

# A numeric user: Kubernetes' runAsNonRoot can check it. /work/results is owned by it, so a named
# volume mounted there starts out writable (Docker copies the image's ownership into a new volume).
USER 10001:10001
# loadgen writes results/<run_id>/ under the working directory
WORKDIR /work
EXPOSE 9402 9403 8000
CMD ["infergauge-exporter", "--listen-address", "0.0.0.0", "--port", "9402"]
