"""Issue 14's hostile-input corpus: every row keeps the README's promises at the edges.

A mistake gets exit 2 and one `error:` line, a failed run exit 1, an interrupted one 130; never
a traceback; nothing recorded is lost (the store and any --out target are unchanged after a
failure, complete after a success, and still the kind of file they were). The rows live in
tests/integration/hostile/cases_*.py, grouped by class; the mechanics in hostile/drivers.py and
hostile/checks.py. Rows a fix has yet to reach are strict xfails naming the mechanism that owns
it, so each fix flips them; HOSTILE_IGNORE_XFAIL=1 runs them all plainly, to see what still fails
and why (/work/briefs/F_failures.md lists them as of commit 643e110).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile import (
    cases_datasets,
    cases_disks,
    cases_explore,
    cases_files,
    cases_flags,
    cases_friction,
    cases_grids,
    cases_library,
    cases_numbers,
    cases_paths,
    cases_process,
    cases_serving,
    cases_signals,
    cases_stores,
    cases_survey,
    cases_user_code,
)
from hostile.case import Case, Workspace, params
from hostile.checks import check_outcome, check_watched, snapshot, store_run_ids, watched_paths
from hostile.drivers import as_process, in_process, make_fifo_reader, permissions_apply, release_fifo_reader
from hostile.setups import base, make_templates

CASES: list[Case] = [
    *cases_flags.CASES,
    *cases_numbers.CASES,
    *cases_paths.CASES,
    *cases_files.CASES,
    *cases_stores.CASES,
    *cases_datasets.CASES,
    *cases_user_code.CASES,
    *cases_process.CASES,
    *cases_signals.CASES,
    *cases_friction.CASES,
    *cases_serving.CASES,
    *cases_library.CASES,
    *cases_explore.CASES,
    *cases_disks.CASES,
    *cases_grids.CASES,
    *cases_survey.CASES,
]


def _fill(text: str, placeholders: dict[str, str]) -> str:
    for name, value in placeholders.items():
        text = text.replace("{" + name + "}", value)
    return text


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_templates(tmp_path_factory.mktemp("hostile-templates"))


@pytest.mark.parametrize("case", params(CASES))
def test_hostile(
    case: Case,
    templates: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Set up the case's workspace, run its command, judge it; undo what the set-up must (a mount)."""
    ws = Workspace(tmp_path / "ws", templates)
    ws.root.mkdir()
    try:
        _run_case(case, ws, capsys, monkeypatch)
    finally:
        for undo in reversed(ws.cleanups):
            undo()


def _run_case(
    case: Case, ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base(ws)
    if case.setup:
        case.setup(ws)
    monkeypatch.chdir(ws.root)  # a relative path a command writes lands here, not in the repo
    for key, value in ws.env.items():
        monkeypatch.setenv(key, value)
    argv = [_fill(arg, ws.placeholders()) for arg in case.argv]
    watched = watched_paths(case, ws)
    before = {name: snapshot(path) for name, (_, path) in watched.items()}
    stores = [name for name, (form, _) in watched.items() if form.startswith("db")]
    ids_before = {name: store_run_ids(watched[name][1]) for name in stores}
    fifo_data: dict[str, bytes] = {}
    readers = {name: make_fifo_reader(ws.paths[name], fifo_data, name) for name in ws.fifo_readers}

    if case.driver == "in":
        with permissions_apply(case.unprivileged):
            outcome = in_process(argv, case.timeout_s, capsys)
    else:
        outcome = as_process(argv, dict(os.environ), ws.root, case.timeout_s, case.driver)
    for name, reader in readers.items():
        release_fifo_reader(ws.paths[name], reader)

    says = tuple(_fill(fragment, ws.placeholders()) for fragment in case.says)
    problems = check_outcome(case, outcome, says)
    failed = outcome.code != 0
    for name, (form, path) in watched.items():
        problems += check_watched(
            name, form, path, before[name], failed, fifo_data.get(name), ids_before.get(name)
        )
    if case.before_measuring and (ws.root / "measured").exists():
        problems.append("it ran steps before refusing")
    if case.check:
        problems += case.check(ws, outcome)
    assert not problems, (
        f"flowrate {' '.join(argv)}: " + "; ".join(problems) + f"\n--- stderr ---\n{outcome.stderr[-1500:]}"
    )
