"""`loadgen sim [flags]`: run the simulated engine as a server (flags as `python -m simengine`)."""

from __future__ import annotations

import click

from simengine.cli import main as simengine_main


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def sim(argv: tuple[str, ...]) -> None:
    """Serve the simulated engine; takes vLLM or SGLang launch flags (see `python -m simengine`)."""
    raise SystemExit(simengine_main(list(argv)))
