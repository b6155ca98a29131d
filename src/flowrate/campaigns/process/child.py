"""One run (a RunConfig, or a GenerateConfig's generation) in a fresh process: what --repeat,
sweeps and scaling share.

One process can carry state from run to run (allocator caches, autotuning choices, a warm or
cold page cache, CPU frequency). A new process per run makes each run independent. The child
sends back its Result as JSON, or the kind of failure and its message, so a caller can tell an
expected outcome (a sweep's batch that does not fit) from a real failure without parsing text.

Where the platform has it, each run's process is forked from a server that has imported torch
and done nothing else (multiprocessing's forkserver, started once per campaign): the
interpreter's start and torch's import (and on a CPU build the imports of dynamo, which a run's
optimizer imports, and of flowrate's run harness: fork_preload), most of a run's start-up on a
CPU (benchmarks/child_startup.py and benchmarks/fork_preload.py), are paid once instead of once
per run. Nothing of an
earlier run can be inherited (the server never runs one), and no CUDA context exists to be
forked: the server never touches the device, and PyTorch supports CUDA in forkserver children
as in spawned ones (plain fork is what CUDA does not survive). The child takes this process's
environment as it is when the run starts. A variable read while the interpreter and torch start
(any but flowrate's own FLOWRATE_* and a few more no library reads then: READ_LATE) is read by
the server, once: when one of them has changed since the server started, the run is spawned
instead, as it always was elsewhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from flowrate.campaigns.process.job import Job, PointConfig, SameConfig, run_job, with_problem
from flowrate.campaigns.process.turns import Turns
from flowrate.errors import FlowrateError, OutOfMemory
from flowrate.problems.registry import is_user_problem
from flowrate.results.schema import Result

# How a run in a fresh process can fail: OutOfMemory, another FlowrateError, or the process died.
OOM = "oom"
ERROR = "error"
CRASHED = "crashed"
# Any other exception in the child: a bug, sent back with its traceback.
BUG = "bug"


@dataclass(frozen=True)
class ChildOutcome:
    """How a run in a fresh process ended: its Result, or the kind of failure and its message.

    The kind lets a caller tell an expected outcome (a sweep's batch that does not fit) from a
    real failure without parsing text. The child's wall-clock times (time.time()) at its start
    and end split a run's overhead into process start-up and work inside the process.
    """

    result: Result | None
    failure: str | None = None  # None when the run succeeded; else OOM, ERROR or CRASHED
    message: str = ""
    child_started: float | None = None
    child_finished: float | None = None
    lower: tuple[Result, ...] = ()  # the Results at the lower rungs the run passed (rungs.watch)


class ChildCrash(RuntimeError):
    """An unexpected exception in a run's process (a bug): it carries the child's traceback."""


def portable(config: SameConfig) -> SameConfig:
    """``config`` as a new process can run it: a user problem's path made absolute."""
    if config.problem.startswith("python:"):
        raise FlowrateError(
            "each run happens in a new process, which cannot receive a Problem object: "
            "give a zoo name or PATH.py:FACTORY"
        )
    if is_user_problem(config.problem):
        return with_problem(config, _absolute(config.problem))  # the child may start elsewhere
    return config


# Modules the fork server imports before it forks any run: torch, and on a CPU build dynamo and
# flowrate's run harness (fork_preload), none of which touches a device on import.
PRELOADED = ["flowrate.campaigns.process.fork_preload"]


class _Server:
    """The environment the fork server started with (None until the first run starts it)."""

    environment: dict[str, str] | None = None


# Variables no library reads as it starts, which a run's child takes from the caller (module
# docstring): flowrate's own, and pytest's name of the test under way (it changes every test).
READ_LATE = ("FLOWRATE_", "PYTEST_CURRENT_TEST")


def _start_up_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(READ_LATE)}


def process_context(method: str | None = None) -> Any:
    """The multiprocessing context a run's process comes from: the fork server where the platform
    has one and the start-up environment is the server's, else spawn (module docstring);
    ``method`` ("spawn" or "forkserver") insists on one, as benchmarks/child_startup.py does."""
    if method == "spawn" or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    environment = _start_up_environment()
    if _Server.environment is None:
        context.set_forkserver_preload(PRELOADED)
        _Server.environment = environment
    elif environment != _Server.environment and method is None:
        return multiprocessing.get_context("spawn")
    return context


def run_in_fresh_process(
    point: Job | PointConfig,
    *,
    argv: list[str] | None = None,
    tensorboard: str | None = None,
    start_method: str | None = None,
) -> ChildOutcome:
    """Run ``point`` (a Job, or a config run as a plain run) in a new process and wait for it
    (used by --repeat, sweeps, explore and compare --run).

    The process is forked from a server that has run nothing, or spawned (module docstring); never
    forked from this one: CUDA does not survive that. A FlowrateError in the child comes back as
    a failure of kind OOM or ERROR; a child that dies before reporting (killed, out of host
    memory, a crash in native code) as CRASHED. Any other exception is a bug: ChildCrash, with the child's
    traceback. The child leaves with os._exit once its answer is sent, skipping the interpreter's
    teardown of torch (about 0.7 s per run on a CPU, paid by every sweep point); it has nothing
    left to flush, and this process still waits for it to be gone before going on. An interrupt
    here ends the child too, and a child whose caller is gone ends itself (_leave_with_parent).
    """
    context = process_context(start_method)
    with _launched(context, _job(point), argv, tensorboard) as child:
        return child.outcome()


def run_in_turns(
    first: PointConfig, second: PointConfig, *, argv: tuple[list[str], list[str]]
) -> tuple[ChildOutcome, ChildOutcome]:
    """Run two configs (plain runs) in two new processes at once that take turns interval by
    interval, ``first`` holding the first turn (flowrate.campaigns.process.turns), and wait for
    both: their outcomes, as run_in_fresh_process gives one. ``argv``: each run's command line.
    Failures are as there; an interrupt ends both."""
    context = process_context()
    mine, theirs = context.Pipe(duplex=True)
    with contextlib.ExitStack() as stack:
        sides = ((first, argv[0], mine, True), (second, argv[1], theirs, False))
        children = [
            stack.enter_context(_launched(context, _job(point), command, None, turns=(peer, holds_first)))
            for point, command, peer, holds_first in sides
        ]
        mine.close()  # the children hold the only ends now: one's end reads as end of file in the other
        theirs.close()
        done = children[0].outcome(), children[1].outcome()
    return done


def _job(point: Job | PointConfig) -> Job:
    job = point if isinstance(point, Job) else Job(point)
    return dataclasses.replace(job, config=portable(job.config))


@dataclass
class _Child:
    """A run's process once started, and the end of the pipe its answer comes on."""

    process: Any
    receiver: Connection

    def outcome(self) -> ChildOutcome:
        """Wait for the child's answer (run_in_fresh_process says what it may be)."""
        try:
            kind, text, started, finished, lower = self.receiver.recv()
        except EOFError:
            self.process.join()
            return ChildOutcome(
                None,
                CRASHED,
                f"its process died before reporting (exit code {self.process.exitcode}: killed, out of "
                "host memory, or a crash)",
            )
        self.process.join()
        if kind == "ok":
            below = tuple(Result.from_json(t) for t in lower)
            return ChildOutcome(Result.from_json(text), None, "", started, finished, below)
        if kind == BUG:
            raise ChildCrash(f"the run's process failed:\n{text}")
        return ChildOutcome(None, kind, text, started, finished)


@contextlib.contextmanager
def _launched(
    context: Any,
    job: Job,
    argv: list[str] | None,
    tensorboard: str | None,
    turns: tuple[Connection, bool] | None = None,
) -> Iterator[_Child]:
    """The job's process, started; on leaving, the pipe closed and the process killed if it is still
    alive (interrupted while waiting: no orphan keeps running). ``turns``: this child's end of the
    connection it takes turns over, and whether it holds the first turn."""
    receiver, sender = context.Pipe(duplex=False)
    environment = dict(os.environ)
    process = context.Process(
        target=_child_main,
        args=(sender, job.to_dict(), argv, tensorboard, environment, turns),
        name="flowrate-run",
    )
    try:
        _start(process, context)
        sender.close()  # the child holds the only writer now: its death reads as end of file here
        yield _Child(process, receiver)
    finally:
        sender.close()
        receiver.close()
        if process.is_alive():
            process.kill()
            process.join()


def _child_main(
    sender: Connection,
    job: dict[str, Any],
    argv: list[str] | None,
    logdir: str | None,
    environment: dict[str, str],
    turns: tuple[Connection, bool] | None = None,
) -> None:
    """The child's whole life: take the caller's environment, run (taking turns over ``turns``'
    connection where given), send the answer, leave at once (see run_in_fresh_process)."""
    code = 1
    try:
        _leave_with_parent()
        os.environ.clear()  # a forked child has the server's: the caller's FLOWRATE_* may differ
        os.environ.update(environment)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the fork server ignores Ctrl-C
        if hasattr(signal, "pthread_sigmask"):  # and holds it from its start (_start): take it now
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        sender.send(run_and_report(job, argv, logdir, Turns(*turns) if turns else None))
        code = 0
    finally:  # an interrupt leaves too, quietly: the parent says what happened
        sender.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _start(process: Any, context: Any) -> None:
    """Start ``process``, the fork server first where ``context`` forks from one, each with Ctrl-C
    held (_sigint_held) until it can take it: the server, which would print a KeyboardInterrupt
    traceback from its imports, never takes it; a spawned run takes it once it is under way
    (_child_main). Waiting for the server to fork the run, this process takes Ctrl-C as ever.
    multiprocessing's resource tracker is started before the hold, as starting it unblocks SIGINT
    (it guards its own start, and ignores Ctrl-C after it)."""
    from multiprocessing import forkserver, resource_tracker

    resource_tracker.ensure_running()
    if context.get_start_method() == "forkserver":
        with _sigint_held():
            forkserver.ensure_running()
        process.start()
    else:
        with _sigint_held():
            process.start()


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread for the block, so in the processes it starts from their first
    instruction (a signal mask survives fork and exec); a Ctrl-C meanwhile reaches this process as
    the block ends, not lost."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _leave_with_parent() -> None:
    """End this process once the one that started it is gone. A caller interrupted (Ctrl-C,
    SIGTERM) while it waits for the fork server to fork this process cannot end it: the server
    forks it afterwards, and a run would go on with no one to report to. A thread waits on
    multiprocessing's parent sentinel (end of file once the caller dropped this process or
    exited) and leaves at once; it waits in the kernel, taking no time from the run."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="flowrate-parent-watch", daemon=True).start()


Report = tuple[str, str, float, float, list[str]]


def run_and_report(
    job: dict[str, Any], argv: list[str] | None, logdir: str | None = None, turns: Turns | None = None
) -> Report:
    """Run a job (flowrate.campaigns.process.job) here, taking ``turns`` with another process where
    given: ("ok", its Result as JSON), or the kind of failure and its message; with this process's
    wall-clock times at start and end, and the Results (JSON) at the lower rungs a job that goes on
    through rungs measured."""
    started = time.time()
    try:
        result, lower = run_job(job, argv, logdir, turns)
        return "ok", result.to_json(), started, time.time(), [r.to_json() for r in lower]
    except OutOfMemory as error:  # crosses the process boundary as text: always picklable
        return OOM, str(error), started, time.time(), []
    except FlowrateError as error:
        return ERROR, str(error), started, time.time(), []
    except Exception as error:
        from flowrate.problems.user import describe_failure

        in_user_code = describe_failure(error)  # raised in the user's problem file: its one line
        if in_user_code is not None:
            return ERROR, in_user_code, started, time.time(), []
        return BUG, traceback.format_exc(), started, time.time(), []


def _absolute(spec: str) -> str:
    path, _, factory = spec.rpartition(":")
    return f"{Path(path).resolve()}:{factory}"
