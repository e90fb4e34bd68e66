"""setuptools hooks: stamp infergauge's commit into `loadgen/_build_info.py` of wheels and sdists.

An install made from a copy (no .git) then still records which commit it was built from
(`loadgen.provenance.stamped_sha`). Outside an infergauge checkout nothing is written, and a stamp
that came in an sdist is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from loadgen.provenance import BUILD_INFO_MODULE, build_info_source, checkout_sha  # noqa: E402


def write_stamp(package_root: Path) -> Path | None:
    """Write `<package_root>/loadgen/_build_info.py` with this checkout's HEAD; None when not in one."""
    sha = checkout_sha(ROOT / "loadgen")
    if sha is None:
        return None
    target = package_root / "loadgen" / BUILD_INFO_MODULE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(build_info_source(sha))
    return target


class StampedBuildPy(build_py):
    """build_py that also writes the commit stamp into the build tree."""

    def run(self) -> None:
        """Build as usual, then stamp."""
        super().run()
        if not self.editable_mode:  # an editable install reads the checkout itself
            write_stamp(Path(self.build_lib))


class StampedSdist(sdist):
    """sdist whose tree carries the commit stamp (wheels built from it keep it)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        """Copy the files as usual, then stamp."""
        super().make_release_tree(base_dir, files)
        write_stamp(Path(base_dir))
