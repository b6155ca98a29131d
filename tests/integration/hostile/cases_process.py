"""Signals, pipes and streams, in real processes: Ctrl-C mid-run and mid-sweep (exit 130, the
store and --out as they were), a reader that went away (`runs --json | head -1`), a full disk on
stdout (`--json > /dev/full`), and values that crash the process itself."""

from __future__ import annotations

from hostile.case import FAILED, HUGE, INTERRUPTED, OK, RUN, TINY, USAGE, Case
from hostile.setups import dataset, plain_file

OSERROR = "CLI OSError boundary"
# a reader that went away: exit quietly (0), with one line (1), or by SIGPIPE as `yes | head` does
CLOSED = (OK, FAILED, 141)

CASES = [
    Case(
        "sigint-mid-run",
        (*RUN, "--duration", "60", "--out", "{out}"),
        INTERRUPTED,
        ("interrupted",),
        setup=plain_file("out", "the previous result\n"),
        watch={"out": "json"},
        driver="sigint",
    ),
    Case(
        "sigint-mid-run-with-loader-workers",
        (*RUN, "--duration", "60", "--data", "{data}", "--loader-workers", "2"),
        INTERRUPTED,
        ("interrupted",),
        setup=dataset(),
        driver="sigint",
        # now and then a worker's resource_sharer thread prints a traceback as Ctrl-C reaches it
        xfail=OSERROR,
        intermittent=True,
    ),
    Case(
        "sigint-mid-sweep",
        ("sweep", *RUN[1:], "--duration", "30", "-g", "batch_size=2,4,8", "--name", "cut"),
        INTERRUPTED,
        ("interrupted",),
        watch={"store": "db+"},
        driver="sigint-sweep",
    ),
    Case("closed-pipe-runs-json", ("runs", "--json"), CLOSED, driver="closed-stdout"),
    Case("closed-pipe-runs-table", ("runs",), CLOSED, driver="closed-stdout"),
    Case("closed-pipe-export", ("export",), CLOSED, driver="closed-stdout"),
    Case("closed-pipe-list-json", ("list", "--json"), CLOSED, driver="closed-stdout"),
    Case(
        "closed-pipe-run-json",
        (*RUN, *TINY, "--json"),
        CLOSED,
        watch={"store": "db+"},
        driver="closed-stdout",
    ),
    Case(
        "full-disk-runs-json",
        ("runs", "--json"),
        FAILED,
        ("No space left",),
        driver="full-stdout",
    ),
    Case("full-disk-runs-table", ("runs",), FAILED, ("No space left",), driver="full-stdout"),
    Case("full-disk-export", ("export",), FAILED, ("No space left",), driver="full-stdout"),
    Case(
        "full-disk-show-json",
        ("show", "aaaa00000001", "--json"),
        FAILED,
        ("No space left",),
        driver="full-stdout",
    ),
    # the run is measured and recorded before stdout fails: the store keeps it
    Case(
        "full-disk-run-json",
        (*RUN, *TINY, "--json"),
        FAILED,
        ("No space left",),
        watch={"store": "db+"},
        driver="full-stdout",
        check=lambda ws, outcome: [] if "recorded as run" in outcome.stderr else ["the run was not recorded"],
    ),
    # issue 4: a thread count no machine has is refused, not a segfault (exit 139)
    Case(
        "threads-hundred-thousand",
        (*RUN, *TINY, "--threads", "100000"),
        USAGE,
        ("--threads",),
        driver="proc",
    ),
    Case(
        "repeat-huge",
        (*RUN, *TINY, "--repeat", HUGE),
        USAGE,
        ("--repeat",),
        driver="proc",
        timeout_s=15,
    ),
]
