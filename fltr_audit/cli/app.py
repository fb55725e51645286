"""The Typer application and its command groups; command modules register onto these."""

from contextvars import ContextVar
from typing import Optional

import typer

from fltr_audit._version import __version__


class PlainHelpCommand(typer.core.TyperCommand):
    """A command whose help is plain text: typer releases before 0.21 escape the brackets of
    ``[default: ...]`` for rich markup even when no markup is rendered (``\\[default: 20]``)."""

    def format_help(self, ctx, formatter) -> None:
        super().format_help(ctx, formatter)
        formatter.buffer[:] = [text.replace("\\[", "[") for text in formatter.buffer]


class PlainHelpGroup(typer.core.TyperGroup):
    """A command group whose help is plain text (see ``PlainHelpCommand``)."""

    def format_help(self, ctx, formatter) -> None:
        super().format_help(ctx, formatter)
        formatter.buffer[:] = [text.replace("\\[", "[") for text in formatter.buffer]


class Typer(typer.Typer):
    """A typer application whose commands and groups print plain help (rich panels truncate long
    option names in narrow terminals and read brackets such as fltr-audit[dask] as markup)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(rich_markup_mode=None, cls=PlainHelpGroup, **kwargs)

    def command(self, *args, **kwargs):
        return super().command(*args, cls=kwargs.pop("cls", PlainHelpCommand), **kwargs)

RUNNING_COMMAND: ContextVar[str] = ContextVar("fltr_audit_running_command", default="")
"""The command ``main`` is running, as typed without the program name; set by ``main`` from its
own parse of the arguments (``spelling.command_names``), so that no click or typer global is read."""

app = Typer(
    name="fltr-audit",
    help="Privacy audit and attack testbed for federated online learning to rank.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = Typer(help="Inspect and generate learning-to-rank data sets.", no_args_is_help=True)
train_app = Typer(help="Train a ranker with a federated (or baseline) algorithm.", no_args_is_help=True)
defenses_app = Typer(help="List the defenses and the guarantees they claim.", no_args_is_help=True)
attacks_app = Typer(help="List the attacks and what they need.", no_args_is_help=True)
algorithms_app = Typer(help="List the algorithms and what their messages reveal.", no_args_is_help=True)
campaign_app = Typer(help="Run and inspect attack campaigns.", no_args_is_help=True)
flower_app = Typer(help="Federated learning to rank on Flower, recorded for attacks.",
                         no_args_is_help=True)
bench_app = Typer(help="Measure speed (never asserted in tests).", no_args_is_help=True)

app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
app.add_typer(defenses_app, name="defenses")
app.add_typer(attacks_app, name="attacks")
app.add_typer(algorithms_app, name="algorithms")
app.add_typer(campaign_app, name="campaign")
app.add_typer(bench_app, name="bench")
app.add_typer(flower_app, name="flower")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"fltr-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Optional[bool] = typer.Option(None, "--version", callback=_print_version, is_eager=True,
                                                 help="Print the version and exit.")) -> None:
    """Privacy audit and attack testbed for federated online learning to rank."""
