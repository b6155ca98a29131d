"""Options shared by the commands that read recorded runs: --store, and which runs to take.

Runs are chosen either by references — run ids (or unique prefixes), tags, result files or
JSON-lines exports — or by filters over the store (--problem, --device, --precision, --tag,
--since, …), not both; with neither, every run in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from flowrate.errors import FlowrateError
from flowrate.results.store import DEFAULT_PATH, ENV_VAR, RunFilter, Store, StoredRun, store_path

STORE_HELP = f"The results store (SQLite). [default: ${ENV_VAR}, else ./{DEFAULT_PATH}]"

store_option = click.option("--store", type=click.Path(dir_okay=False), help=STORE_HELP)

_FILTERS = [
    click.option("--problem", "-p", help="Only runs of this problem (family, or family/size)."),
    click.option("--device", help="Only runs on a device whose name contains this (or a type: cpu, cuda)."),
    click.option("--precision", help="Only runs at this precision (fp32, bf16, …)."),
    click.option("--mode", type=click.Choice(["train", "infer"]), help="Only training or inference runs."),
    click.option("--execution", help="Only runs in this execution mode."),
    click.option("--tag", help="Only runs with this tag."),
    click.option("--sweep", help="Only runs of this sweep (id, id prefix or name)."),
    click.option("--since", help="Only runs from this date or time on (2026-11-21, or 7d / 12h ago)."),
    click.option("--until", help="Only runs up to this date (inclusive) or time."),
]
FILTER_NAMES = ("problem", "device", "precision", "mode", "execution", "tag", "sweep", "since", "until")


def filter_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_FILTERS):
        function = option(function)
    return function


def selection_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """REFS… plus the filters and --store: everything select_runs() needs."""
    function = filter_options(function)
    function = store_option(function)
    return click.argument("refs", nargs=-1, metavar="[RUN|TAG|FILE]...")(function)


def pop_filter(flags: dict[str, Any]) -> RunFilter:
    """Take the filter options out of a command's keyword arguments."""
    return RunFilter(**{name: flags.pop(name, None) for name in FILTER_NAMES})


def select_runs(store: str | None, refs: Sequence[str], where: RunFilter) -> list[StoredRun]:
    """The runs the references name, or the runs the filters match; each run once, in order."""
    filtering = any(getattr(where, name) for name in FILTER_NAMES)
    if refs and filtering:
        raise click.UsageError("give runs (ids, tags, files) or filters (--problem, --tag, …), not both")
    runs: list[StoredRun] = []
    opened: Store | None = None
    try:
        for ref in refs:
            path = Path(ref)
            if path.is_file():
                from flowrate.results.transfer import read_results

                runs += [StoredRun.from_result(result, tags) for result, tags in read_results(path)]
                continue
            if opened is None:
                opened = Store(store, create=False)
            runs += opened.resolve(ref)
        if not refs:
            opened = Store(store, create=False)
            runs = opened.runs(where)
    finally:
        if opened is not None:
            opened.close()
    unique: dict[str, StoredRun] = {}
    for run in runs:
        unique.setdefault(run.run_id, run)
    if not unique:
        what = "match those filters" if filtering else "are recorded"
        raise FlowrateError(f"no runs {what} in the store {store_path(store)}; `flowrate runs` lists them")
    return list(unique.values())
