"""Stores: damaged, another app's SQLite, newer, truncated, read-only (the file or its folder),
and stores holding a run an older flowrate let in with bad values.

A store that cannot be used is bad input (exit 2) named in one line and left untouched; a
reading command opens a read-only store read-only and leaves nothing beside it; a writing command
refuses it before measuring, giving the true reason; a reader skips a bad row with a warning.
"""

from __future__ import annotations

from hostile.case import MARKED_RUN, OK, RUN_A, RUN_B, USAGE, Case, combine
from hostile.problems import user_problem
from hostile.setups import (
    bad_row,
    foreign_sqlite,
    newer_store,
    read_only_store,
    read_only_store_folder,
    store_bytes,
    summary,
    sweep_named,
    truncated_store,
    unreadable_row,
)

# commands that only read the store: they must leave it byte for byte as it was
_READERS = {
    "runs": ("runs",),
    "runs-json": ("runs", "--json"),
    "show": ("show", RUN_A),
    "export": ("export",),
    "pareto": ("pareto",),
    "report": ("report", "--out", "{tmp}/r.html"),
    "plot": ("plot", "throughput", "--out", "{tmp}/p.png"),
    "compare": ("compare", RUN_A, RUN_B),
}


def _unusable(
    kind: str, setup, fragment: str, commands: tuple[str, ...], xfail: str | None = None
) -> list[Case]:  # type: ignore[no-untyped-def]
    cases = [
        Case(
            f"{kind}-{name}",
            _READERS[name],
            USAGE,
            (fragment,),
            setup=setup,
            watch={"store": "same"},
            xfail=xfail,
        )
        for name in commands
    ]
    cases += [
        Case(
            f"{kind}-run",
            MARKED_RUN,
            USAGE,
            (fragment,),
            setup=combine(setup, user_problem),
            before_measuring=True,
            xfail=xfail,
        ),
        Case(f"{kind}-import", ("import", "{result}"), USAGE, (fragment,), setup=setup, xfail=xfail),
    ]
    return cases


def _read_only(kind: str, setup) -> list[Case]:  # type: ignore[no-untyped-def]
    readers = [
        Case(
            f"{kind}-{name}",
            _READERS[name],
            OK,
            setup=setup,
            watch={"store": "same"},
            unprivileged=True,
        )
        for name in ("runs", "show", "export", "report")
    ]
    writers = [
        Case(
            f"{kind}-run",
            MARKED_RUN,
            USAGE,
            ("read-only",),
            setup=combine(setup, user_problem),
            unprivileged=True,
            before_measuring=True,
        ),
        Case(
            f"{kind}-import",
            ("import", "{result}"),
            USAGE,
            ("read-only",),
            setup=setup,
            unprivileged=True,
        ),
    ]
    return readers + writers


_FAST = bad_row(RUN_B, summary(samples_per_sec="fast"), column="fast")
_INF = bad_row(RUN_B, summary(samples_per_sec=float("inf")), column=float("inf"))


def _bad_row(kind: str, setup, names: tuple[str, ...]) -> list[Case]:  # type: ignore[no-untyped-def]
    return [
        Case(
            f"{kind}-{name}",
            _READERS[name],
            OK,
            setup=setup,
            watch={"store": "same"},
            warns=(RUN_B,),
            out_json=name == "runs-json",
        )
        for name in names
    ]


CASES = [
    *_unusable(
        "store-garbage",
        store_bytes(b"garbage" * 700),
        "not a flowrate results store",
        ("runs", "show", "export", "report"),
    ),
    *_unusable("store-foreign-sqlite", foreign_sqlite, "not a flowrate results store", ("runs", "pareto")),
    *_unusable("store-newer", newer_store, "newer flowrate", ("runs", "show")),
    Case(
        "store-truncated-runs",
        ("runs",),
        USAGE,
        ("damaged",),
        setup=truncated_store,
        watch={"store": "same"},
    ),
    Case(
        "store-truncated-report",
        _READERS["report"],
        USAGE,
        ("damaged",),
        setup=truncated_store,
        watch={"store": "same"},
    ),
    # a reading command does not write: an empty file stays empty
    Case(
        "store-empty-file-runs",
        ("runs",),
        OK,
        setup=store_bytes(b""),
        watch={"store": "same"},
    ),
    *_read_only("store-read-only-file", read_only_store),
    *_read_only("store-read-only-folder", read_only_store_folder),
    # a run an old import let in: readers skip it with a warning naming it (issue 2)
    *_bad_row("store-row-string", _FAST, ("runs", "runs-json", "report", "pareto", "plot", "export")),
    *_bad_row("store-row-inf", _INF, ("runs-json", "report", "pareto")),
    *_bad_row("store-row-not-json", unreadable_row, ("report", "pareto", "export")),
    Case(
        "store-row-string-show-it",
        ("show", RUN_B),
        USAGE,
        (RUN_B,),
        setup=_FAST,
        watch={"store": "same"},
    ),
    Case("store-row-string-show-another", ("show", RUN_A), OK, setup=_FAST, watch={"store": "same"}),
    Case(
        "store-row-string-compare",
        ("compare", RUN_A, RUN_B),
        USAGE,
        (RUN_B,),
        setup=_FAST,
        watch={"store": "same"},
    ),
    # issue 10: a sweep name names one grid
    Case(
        "sweep-name-reused-with-another-grid",
        (
            "sweep",
            "-p",
            "fc_mnist",
            "--size",
            "debug",
            "-g",
            "batch_size=2,4",
            "--name",
            "grid-a",
            "--dry-run",
        ),
        USAGE,
        ("--name", "grid-a"),
        setup=sweep_named("grid-a"),
    ),
]
