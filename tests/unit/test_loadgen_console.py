"""The `loadgen` console script (loadgen.cli.console): the command's exit status, output and files as
`loadgen.cli.main.main` leaves them, exit handlers run, a live thread waited for, and garbage
collection off only while start-up imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _console(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom loadgen.cli.console import console\n"
    code += f"sys.argv = ['loadgen', *{list(args)!r}]\nconsole()\n"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def test_the_exit_status_and_output_are_the_commands() -> None:
    version = _console("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("loadgen, version ")
    usage = _console("run", "--rate", "fast")
    assert usage.returncode == 2
    assert "fast" in usage.stderr


@pytest.mark.timeout(60)
def test_a_whole_run_leaves_its_output_and_record_whole(tmp_path: Path) -> None:
    from tests.loadgen_servers import FakeEngine, ServerThread, plain_run_args

    engine = FakeEngine(ttft_s=0.001, itl_s=0.001)
    with ServerThread(engine.app) as server:
        args = plain_run_args(server.base_url, tmp_path, 20, 200, 4)
        done = _console(*args, timeout=50)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"]["ok"] == 20  # stdout flushed whole before the exit
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len((run_dir / "requests.jsonl").read_text().splitlines()) == 20
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "complete"


def test_exit_handlers_run_and_a_text_code_is_printed_with_status_1() -> None:
    prelude = "import atexit\natexit.register(lambda: print('handler ran', flush=True))"
    code = "import sys\n" + prelude + "\nfrom loadgen.cli.console import leave\nleave('went wrong')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 1
    assert done.stdout == "handler ran\n"
    assert done.stderr == "went wrong\n"


def test_a_live_thread_is_waited_for(tmp_path: Path) -> None:
    out = tmp_path / "late.txt"
    code = (
        "import threading, time\n"
        "from loadgen.cli.console import leave\n"
        f"def late():\n    time.sleep(0.3)\n    open({str(out)!r}, 'w').write('written')\n"
        "threading.Thread(target=late).start()\n"
        "leave(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 3
    assert out.read_text() == "written"


def test_collection_is_off_through_start_up_and_on_for_the_command() -> None:
    code = (
        "import gc, click\n"
        "from loadgen.cli.console import console\n"
        "import loadgen.cli.main as m\n"
        "seen = []\n"
        "real = m.LazyGroup.get_command\n"
        "def get_command(self, ctx, name):\n"
        "    seen.append(gc.isenabled())\n"
        "    command = real(self, ctx, name)\n"
        "    seen.append(gc.isenabled())\n"
        "    print(seen, gc.get_freeze_count() > 10000, flush=True)\n"
        "    raise SystemExit(0)\n"
        "m.LazyGroup.get_command = get_command\n"
        "import sys\nsys.argv = ['loadgen', 'run', '--help']\n"
        "console()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[False, True] True"  # off while importing; on, start-up frozen
