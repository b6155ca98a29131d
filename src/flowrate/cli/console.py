"""The one owner of terminal output: status and tables to stderr, data to stdout.

The live progress display (flowrate/cli/progress.py) draws on this module's stderr console.

Formatting is done by pure functions (flowrate/units.py, cli/*_text.py); this module only prints.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

_err = Console(stderr=True, highlight=False, soft_wrap=True)
# piped output is not cut at 80 columns: tables stay one row per line for grep and files
_out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def stderr_console() -> Console:
    """The stderr console, for live displays (flowrate/cli/progress.py)."""
    return _err


def status(message: str, quiet: bool = False) -> None:
    if not quiet:
        _err.print(f"[dim]{escape(message)}[/dim]")


def warn(message: str) -> None:
    _err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def error(message: str) -> None:
    _err.print(f"[bold red]error:[/bold red] {escape(message)}")


def detail(message: str) -> None:
    """A plain line on stderr: the items under an error or a heading."""
    _err.print(escape(message))


def data(text: str) -> None:
    """Machine-readable output (JSON) on stdout, exactly as given."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def key_value_table(title: str, rows: Sequence[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(escape(key), escape(value))
    _err.print(table)


def grid(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right_aligned: Sequence[int] = (),
    to_stdout: bool = True,
) -> None:
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(header):
        table.add_column(escape(name), justify="right" if i in right_aligned else "left")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    (_out if to_stdout else _err).print(table)
