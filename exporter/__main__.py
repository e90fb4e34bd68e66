"""`python -m exporter` = `infergauge-exporter`."""

from exporter.cli import run

run()
