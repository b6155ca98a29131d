"""The one owner of terminal output: status and tables to stderr, data to stdout.

The live progress display (flowrate/cli/progress.py) draws on this module's stderr console.

Formatting is done by pure functions (flowrate/units.py, cli/*_text.py); this module only prints.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowrate.errors import PathError


class _Stdout(Console):
    """A console whose broken pipe is an error like any other failed write (rich's own answer is
    a silent exit 1); flowrate/cli/boundary.py ends the command quietly, as Unix tools do."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


_err = Console(stderr=True, highlight=False, soft_wrap=True)
# piped output is not cut at 80 columns: tables stay one row per line for grep and files
_out = _Stdout(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


@contextlib.contextmanager
def _writing_stdout() -> Iterator[None]:
    """A failed write to stdout (a closed pipe, a full disk) as one PathError naming the stream."""
    try:
        yield
    except OSError as error:
        raise PathError("cannot write to standard output", error, stdout=True) from None


def stderr_console() -> Console:
    """The stderr console, for live displays (flowrate/cli/progress.py)."""
    return _err


def status(message: str, quiet: bool = False) -> None:
    if not quiet:
        _err.print(f"[dim]{escape(message)}[/dim]")


def warn(message: str) -> None:
    _err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def error(message: str) -> None:
    with contextlib.suppress(OSError):  # stderr itself is gone: there is no one left to tell
        _err.print(f"[bold red]error:[/bold red] {escape(message)}")


def detail(message: str) -> None:
    """A plain line on stderr: the items under an error or a heading."""
    _err.print(escape(message))


def data(text: str) -> None:
    """Machine-readable output (JSON) on stdout, exactly as given."""
    with _writing_stdout():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def key_value_table(title: str, rows: Sequence[tuple[str, str]], to_stdout: bool = False) -> None:
    """Two columns, key and value: a run's summary (stderr, beside its progress), or what an
    inspection command was asked for (``to_stdout``: `flowrate show ID > run.txt` keeps it)."""
    table = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(escape(key), escape(value))
    _print(table, to_stdout)


def grid(
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right_aligned: Sequence[int] = (),
    to_stdout: bool = True,
    whole: Sequence[int] = (),
) -> None:
    """A table; the ``whole`` columns (a run id: what a user copies) are never wrapped or cut on
    a narrow terminal: the others give way."""
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(header):
        widest = max((len(row[i]) for row in rows), default=0)
        table.add_column(
            escape(name),
            justify="right" if i in right_aligned else "left",
            no_wrap=i in whole,
            min_width=widest if i in whole else None,
        )
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    _print(table, to_stdout)


def _print(table: Table, to_stdout: bool) -> None:
    if not to_stdout:
        _err.print(table)
        return
    with _writing_stdout():
        _out.print(table)
