# infergauge image: the exporter (default command), the simulated engine and loadgen.
#   docker build -t infergauge:0.1.0 .
# NVML comes from the host driver: run with the NVIDIA container toolkit (compose reserves the GPUs).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/infergauge

# Only what the package needs (keeps the build context's .venv and results out of the image).
COPY pyproject.toml README.md ./
COPY loadgen ./loadgen
COPY simengine ./simengine
COPY exporter ./exporter
COPY grafana/dashboards ./grafana/dashboards
RUN pip install . && useradd --system --uid 10001 infergauge && mkdir -p /work/results && chown -R infergauge /work

USER infergauge
# loadgen writes results/<run_id>/ under the working directory (compose mounts ./results here)
WORKDIR /work
EXPOSE 9402 9403 8000
CMD ["infergauge-exporter", "--host", "0.0.0.0", "--port", "9402"]
