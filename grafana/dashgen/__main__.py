"""`python -m grafana.dashgen`: regenerate grafana/dashboards/*.json."""

from __future__ import annotations

from . import write_all

if __name__ == "__main__":
    for path in write_all():
        print(path)
