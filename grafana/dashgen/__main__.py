"""`python -m grafana.dashgen`: regenerate grafana/dashboards/*.json; --check exits 1 on drift."""

from __future__ import annotations

import argparse
import sys

from . import DASHBOARD_DIR, drifted, write_all


def main(argv: list[str] | None = None) -> int:
    """Write every dashboard, or with --check name the ones whose file differs from the generator's."""
    parser = argparse.ArgumentParser(prog="python -m grafana.dashgen", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a file differs",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = drifted(DASHBOARD_DIR)
        for path in stale:
            print(f"{path}: differs from the generator (run `python -m grafana.dashgen` and commit it)")
        if not stale:
            print(f"{DASHBOARD_DIR}: every dashboard matches the generator")
        return 1 if stale else 0
    for path in write_all():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
