"""Every command has help with an example, and the README names it."""

from pathlib import Path

import click

from cli_helpers import run_cli
from ncclforensics.cli import cli

README = (Path(__file__).parents[1] / "README.md").read_text()


def commands(group: click.Group, prefix=()):
    for name, command in sorted(group.commands.items()):
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from commands(command, prefix + (name,))


def test_every_command_has_help_with_an_example_and_is_in_the_readme():
    found = list(commands(cli))
    assert {" ".join(path) for path, _ in found} >= {"parse", "diff", "postmortem", "gates", "acceptance", "live",
                                                     "live sidecar", "live ras"}
    for path, _ in found:
        code, out, _ = run_cli(*path, "--help")
        assert code == 0 and "Example:" in out, path
        assert f"ncclforensics {' '.join(path)}" in README, path
