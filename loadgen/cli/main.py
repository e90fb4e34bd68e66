"""The `loadgen` command: one click group, one file per subcommand, `run` as the default."""

from __future__ import annotations

import gc
import importlib
from typing import Any

import click

from loadgen import __version__

# name -> "module:attribute" of a click.Command; imported only when used so `loadgen --help`
# stays fast and one broken subcommand never takes the others down.
COMMANDS: dict[str, str] = {
    "run": "loadgen.cli.run:run",
    "sim": "loadgen.cli.sim:sim",
    "preflight": "loadgen.cli.preflight:preflight",
    "grafana": "loadgen.cli.grafana:grafana",
    "sweep": "loadgen.cli.sweep:sweep",
    "capacity": "loadgen.cli.capacity:capacity",
    "experiment": "loadgen.cli.experiment:experiment",
    "align": "loadgen.cli.align:align",
    "diff": "loadgen.cli.diff:diff",
    "report": "loadgen.cli.report:report",
    "store": "loadgen.cli.store:store",
    "baseline": "loadgen.cli.baseline:baseline",
    "merge": "loadgen.cli.merge:merge",
}
DEFAULT_COMMAND = "run"
# set by the console script (loadgen.cli.console), which starts with garbage collection off
START_UP_GC_OFF = [False]


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use; unknown leading options go to `run`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        _end_start_up()
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `loadgen --target sglang --rate 10` means `loadgen run --target sglang --rate 10`.
        if args and args[0] not in COMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


def _end_start_up() -> None:
    """Start-up is over (the subcommand is imported): freeze what it made out of later collections
    and turn collection back on, where the console script turned it off."""
    if START_UP_GC_OFF[0]:
        START_UP_GC_OFF[0] = False
        gc.freeze()
        gc.enable()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="loadgen")  # no installed distribution needed
def cli() -> None:
    """infergauge load generator: reproducible, explainable LLM serving benchmarks.

    Without a subcommand, options go to `loadgen run` (e.g. `loadgen --target sglang --rate 10`).
    """


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="loadgen")


if __name__ == "__main__":  # pragma: no cover
    main()
