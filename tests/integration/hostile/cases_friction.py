"""Friction (issue 14, 11-17): inspection output on stdout, run ids a terminal does not cut,
tags that cannot swallow a report, a warning for more threads than cores, one error line under
torchrun, --out suffixes that mean what they say, checkpoint retention."""

from __future__ import annotations

from pathlib import Path

from hostile.case import FAILED, OK, RUN, RUN_A, RUN_B, TINY, USAGE, Case
from hostile.setups import dataset


def _at_most_two_checkpoints(ws, outcome) -> list[str]:  # type: ignore[no-untyped-def]
    kept = sorted(p.name for p in Path(ws.root / "ck").iterdir()) if (ws.root / "ck").exists() else []
    return [] if len(kept) <= 2 else [f"{len(kept)} checkpoints kept: {kept}"]


CASES = [
    # issue 11: `flowrate show ID > run.txt` must not write an empty file
    Case("show-prints-to-stdout", ("show", RUN_A), OK, out=(RUN_A, "samples/s")),
    Case(
        "data-info-prints-to-stdout",
        ("data", "info", "{data}"),
        OK,
        out=("64",),
        setup=dataset(),
    ),
    # issue 12: a 110-column terminal shows whole run ids
    Case("runs-on-a-110-column-terminal", ("runs",), OK, out=(RUN_A, RUN_B), driver="pty"),
    # issue 17: "1 runs"
    Case(
        "runs-one-run-is-singular",
        ("runs", "-n", "1"),
        OK,
        out=("1 run ",),
        not_says=("1 runs",),
    ),
    # issue 13: tags
    Case("tag-empty", (*RUN, *TINY, "-t", ""), USAGE, ("--tag",)),
    Case("tag-with-newline", (*RUN, *TINY, "-t", "night\nly"), USAGE, ("--tag",)),
    Case("tag-5000-characters", (*RUN, *TINY, "-t", "x" * 5000), USAGE, ("--tag",)),
    Case("runs-filter-empty-tag", ("runs", "--tag", ""), USAGE, ("--tag",)),
    # issue 4: more threads than cores gets a warning
    Case(
        "threads-more-than-cores-warns",
        (*RUN, *TINY, "--threads", "64"),
        OK,
        warns=("--threads",),
    ),
    # issue 17: report --out x.pdf wrote HTML
    Case("report-out-pdf", ("report", "--out", "{tmp}/report.pdf"), USAGE, (".pdf",)),
    # issue 17: checkpoints pile up without retention
    Case(
        "keep-checkpoints",
        (
            *RUN,
            "--steps",
            "6",
            "--preheat",
            "1",
            "--checkpoint-every",
            "1",
            "--checkpoint-dir",
            "{tmp}/ck",
            "--keep-checkpoints",
            "2",
        ),
        OK,
        check=_at_most_two_checkpoints,
    ),
    # issue 17: under torchrun the one error line is printed once, by rank 0
    Case(
        "torchrun-error-once",
        ("run", "--problem", "nope"),
        (FAILED, USAGE),
        ("nope",),
        driver="torchrun",
        timeout_s=180,
    ),
]
