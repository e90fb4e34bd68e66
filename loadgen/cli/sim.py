"""`loadgen sim [flags]`: run the simulated engine as a server (flags as `python -m simengine`).

Also the check of `loadgen run --target sim --sim-X V` flags: they become simengine's `--X V` and are
validated by simengine's own parser before the run starts, so a bad one is a one-line usage error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import click

from simengine.cli import main as simengine_main
from simengine.config import ConfigError, parse_args

_SIM_FLAG = re.compile(r"(?<![\w-])--(?=[a-z])")


def check_sim_args(sim_args: Sequence[str]) -> None:
    """Raise click.UsageError naming the `--sim-X` flag and value simengine rejects (else nothing)."""
    try:
        parse_args(list(sim_args))
    except ConfigError as exc:
        raise click.UsageError(_SIM_FLAG.sub("--sim-", str(exc))) from None


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def sim(argv: tuple[str, ...]) -> None:
    """Serve the simulated engine; takes vLLM or SGLang launch flags (see `python -m simengine`)."""
    raise SystemExit(simengine_main(list(argv)))
