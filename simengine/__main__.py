"""`python -m simengine [flags]`: run the simulated engine as a server."""

from __future__ import annotations

import sys

from simengine.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
