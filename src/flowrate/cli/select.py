"""Which recorded runs a command takes, from the selection options (flowrate.cli.options).

Runs are chosen either by references — run ids (or unique prefixes), tags, result files or
JSON-lines exports — or by filters over the store (--problem, --device, --precision, --tag,
--since, …), not both; with neither, every run in the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from flowrate.cli.options import FILTER_NAMES
from flowrate.errors import FlowrateError
from flowrate.results.store import Store, StoredRun, store_path
from flowrate.results.store_filter import RunFilter

_LISTED = 10  # sweeps or tags named when a --sweep or --tag names none of them


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
            from flowrate.results.transfer import read_results, result_file

            path = result_file(ref)  # a .json or .jsonl file, else a run id or tag
            if path is not None:
                runs += [StoredRun.from_result(result, tags) for result, tags in read_results(path)]
                continue
            if opened is None:
                opened = Store(store, create=False)
            runs += opened.resolve(ref)
        if not refs:
            opened = Store(store, create=False)
            runs = opened.runs(where)
            if not runs:
                _name_what_is_missing(opened, where)
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


def _name_what_is_missing(opened: Store, where: RunFilter) -> None:
    """Refuse a --sweep or --tag that names nothing in the store, listing what it holds (a
    docs example's placeholder, `--sweep sweep-1a2b3c`, is not "no runs match")."""
    if where.sweep:
        sweeps = opened.sweeps()
        named = [s for s in sweeps if s["name"] == where.sweep or s["sweep_id"].startswith(where.sweep)]
        if not named:
            known = ", ".join(f"{s['name']} ({s['sweep_id']})" for s in sweeps[:_LISTED])
            held = f"these exist: {known}" if known else "it holds no sweeps"
            raise FlowrateError(f"no sweep named {where.sweep!r} in the store {opened.path}; {held}")
    if where.tag:
        tags = opened.all_tags()
        if where.tag not in tags:
            known = ", ".join(sorted(tags)[:_LISTED])
            held = f"its tags: {known}" if known else "no run in it has a tag"
            raise FlowrateError(f"no run is tagged {where.tag!r} in the store {opened.path}; {held}")
