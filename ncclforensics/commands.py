"""What both command groups (`ncclforensics` and its `live` group, which also runs on its own) share: the exit
codes and the one-line errors."""

from __future__ import annotations

import click

from .errors import ForensicsError, printable

EXIT_CONSISTENT, EXIT_DIVERGED, EXIT_TROUBLE = 0, 1, 2


def exit_code(trouble: bool, found: bool = False) -> int:
    """A command's exit code, as diff(1)'s: 2 when an input or output could not be used (trouble wins: the good
    inputs' results are still printed), 1 when what the command looks for was found (the ranks diverged, gate
    sessions disagree, a run's acceptance collapsed, a live check saw a disagreement), else 0."""
    return EXIT_TROUBLE if trouble else EXIT_DIVERGED if found else EXIT_CONSISTENT


class OneLineErrors(click.Group):
    """A command group that turns ForensicsError, and any fault of the analysis itself, into one line on stderr and
    exit code 2; the traceback only with the root command's --debug."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own: usage errors, exits, Ctrl-C
        except ForensicsError as e:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: {printable(e)}", err=True)  # one line, whatever the paths in it hold
            ctx.exit(EXIT_TROUBLE)
        except Exception as e:  # a fault of the tool, not of the input: said in one line, never as a traceback
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: internal error ({type(e).__name__}: {printable(str(e))[:200]}); rerun with --debug "
                       f"for the traceback", err=True)
            ctx.exit(EXIT_TROUBLE)
