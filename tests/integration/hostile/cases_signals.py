"""SIGTERM, early Ctrl-C and a tracking server that is down, in real processes: SIGTERM (`kill
PID`, a scheduler's stop) takes Ctrl-C's path and ends with 143 and `terminated`, the store and
--out as they were or holding what was completed; Ctrl-C while a sweep's fork server still
imports torch is one line and exit 130; no process the command started outlives it (the drivers
check its process group); an MLflow server that refuses is said in one line, before measuring,
within the case's limit (MLflow's own retries wait minutes)."""

from __future__ import annotations

from typing import Any

from hostile.case import INTERRUPTED, MARKED_RUN, RUN, RUN_A, RUN_B, USAGE, Case, Workspace
from hostile.cases_process import OSERROR
from hostile.checks import store_run_ids
from hostile.problems import user_problem
from hostile.setups import dataset, plain_file

# What a shell reports for a process that SIGTERM ended (README "Exit codes").
TERMINATED = 143
# A sweep whose points each run longer than the drivers give processes to leave (LEFT_GRACE_S):
# a point's process left running after the command ended is seen.
SWEEP = ("sweep", *RUN[1:], "--duration", "60", "-g", "batch_size=2,4,8")
# A port on this machine nothing listens on: connecting is refused at once.
REFUSING = "http://127.0.0.1:1"


def _one_point_recorded(ws: Workspace, outcome: Any) -> list[str]:
    """The store holds the first point's run, and only it, beside the runs it held before."""
    ids = store_run_ids(ws.path("store"))
    new = sorted((ids or set()) - {RUN_A, RUN_B})
    return [] if len(new) == 1 else [f"the store holds {len(new)} new runs, not the first point's one"]


CASES = [
    Case(
        "sigterm-mid-run",
        (*RUN, "--duration", "60", "--out", "{out}"),
        TERMINATED,
        ("terminated",),
        setup=plain_file("out", "the previous result\n"),
        watch={"out": "json"},
        driver="sigterm",
    ),
    Case(
        "sigterm-mid-run-with-loader-workers",
        (*RUN, "--duration", "60", "--data", "{data}", "--loader-workers", "2"),
        TERMINATED,
        ("terminated",),
        setup=dataset(),
        driver="sigterm",
        # as with Ctrl-C (cases_process): now and then multiprocessing's resource_sharer thread,
        # which hands the loader workers their file descriptors, prints a traceback as the
        # process ends (seen once in a clean-clone CI run)
        xfail=OSERROR,
        intermittent=True,
    ),
    Case(
        "sigterm-mid-sweep",
        ("sweep", *RUN[1:], "--duration", "3", "-g", "batch_size=2,4,8", "--name", "cut"),
        TERMINATED,
        ("terminated",),
        watch={"store": "db+"},
        driver="sigterm-sweep",
        check=_one_point_recorded,
    ),
    Case(
        "sigint-early-sweep",
        (*SWEEP, "--name", "early"),
        INTERRUPTED,
        ("interrupted",),
        watch={"store": "db+"},
        driver="sigint-early-sweep",
    ),
    Case(
        "sigterm-early-sweep",
        (*SWEEP, "--name", "early"),
        TERMINATED,
        ("terminated",),
        watch={"store": "db+"},
        driver="sigterm-early-sweep",
    ),
    Case(
        "mlflow-server-down",
        (*MARKED_RUN, "--mlflow", REFUSING),
        USAGE,
        ("--mlflow: cannot use tracking store " + REFUSING,),
        setup=user_problem,
        before_measuring=True,
        timeout_s=60,
    ),
]
