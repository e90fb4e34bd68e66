"""infergauge load generator: streaming client, exact statistics, live metrics, run records."""

from __future__ import annotations

__version__ = "0.1.0"  # the one version: `loadgen --version`, manifests; pyproject.toml matches it (a test)
