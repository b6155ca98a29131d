"""`flowrate explore`: space files with values of the wrong TOML type, a binary file, a range no
grid could hold, non-finite flags, and the label of a run whose length --steps sets.

A file's value is read by the rule of the flag it stands for and never converted (a seed of 1.9
is not a seed of 1); each mistake is exit 2 and one line naming the file and the key, before the
store or the study is opened. The last case is a real tiny exploration.
"""

from __future__ import annotations

from typing import Any

from hostile.case import OK, USAGE, Case, Workspace
from hostile.checks import Outcome

# A tiny exploration's problem and timing (fc_mnist/debug, two timed steps).
_TINY = ("explore", "-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--steps", "2", "--preheat", "1")
_SPACE = '[space]\nbatch_size = "1..4:log2"\n'


def _space_file(content: str | bytes) -> Any:
    """space.toml ({space} in argv) holding ``content``."""

    def setup(ws: Workspace) -> None:
        path = ws.path("space", "space.toml")
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def _file_case(label: str, content: str | bytes, key: str, *fragments: str) -> Case:
    """A space file ``content`` that is refused, naming the file and ``key``."""
    where = f"{{space}}: {key}:" if key else "{space}:"
    return Case(
        f"explore-file-{label}",
        (*_TINY, "--space-file", "{space}"),
        USAGE,
        ("--space-file", where, *fragments),
        setup=_space_file(content),
        not_says=("Traceback",),
    )


def _explore(setting: str, value: str) -> str:
    return f"{_SPACE}[explore]\n{setting} = {value}\n"


def _flag_case(label: str, *flags: str, says: tuple[str, ...]) -> Case:
    return Case(f"explore-flag-{label}", (*_TINY, "--space", "batch_size=1..4", *flags), USAGE, says)


def _labelled_by_steps(ws: Workspace, outcome: Outcome) -> list[str]:
    """The run's status line and the opening line say 2 steps, not the default 10 s."""
    problems = []
    if "runs of 2 steps" not in outcome.stderr:
        problems.append("the opening line does not say `runs of 2 steps`")
    if "rung 0 (2 steps)" not in outcome.stderr:
        problems.append("the run's line does not say `rung 0 (2 steps)`")
    if "(10 s)" in outcome.stderr or "runs of 10 s" in outcome.stderr:
        problems.append("a run bounded by --steps is labelled in seconds")
    return problems


CASES = [
    # [space]: a range, a comma list or an array of values, never a table or a nested array
    _file_case("space-table", "[space]\nbatch_size = {a = 1}\n", "batch_size", "not a table"),
    _file_case("space-nested-array", "[space]\nbatch_size = [[1, 2]]\n", "batch_size", "an array"),
    _file_case("space-huge-range", '[space]\nthreads = "1..99999999999"\n', "threads", "more than the 1024"),
    # [base]: one value each, within its flag's bounds
    _file_case("base-table", f"{_SPACE}[base]\nthreads = {{a = 1}}\n", "threads", "not a table"),
    _file_case("base-date", f"{_SPACE}[base]\nseed = 1979-05-27\n", "seed", "not a date"),
    _file_case("base-duration-nan", f"{_SPACE}[base]\nduration = nan\n", "duration_s", "nan"),
    # [explore]: each setting as its flag reads it
    _file_case("seed-string", _explore("seed", '"abc"'), "seed", "integer 0 or more"),
    _file_case("seed-fraction", _explore("seed", "1.9"), "seed", "got 1.9"),
    _file_case("seed-nan", _explore("seed", "nan"), "seed", "got nan"),
    _file_case("initial-string", _explore("initial", '"many"'), "initial", "a positive integer"),
    _file_case("initial-negative", _explore("initial", "-2"), "initial", "got -2"),
    _file_case("constraints-number", _explore("constraints", "5"), "constraints", "not an integer"),
    _file_case("objectives-number", _explore("objectives", "5"), "objectives", "not an integer"),
    _file_case(
        "objectives-one-string", _explore("objectives", '"speed:max"'), "objectives", "unknown metric 'speed'"
    ),
    _file_case("budget-fraction", _explore("budget", "1.5"), "budget", "not a float"),
    _file_case("budget-boolean", _explore("budget", "true"), "budget", "not a boolean"),
    _file_case("name-number", _explore("name", "3"), "name", "not an integer"),
    _file_case("binary", bytes(range(256)) * 4, "", "not UTF-8"),
    # flags: the same rules, and no grid built before its size is known
    Case(
        "explore-flag-huge-range",
        (*_TINY, "--space", "batch_size=1..1000000000000"),
        USAGE,
        ("--space", "batch_size", "1024"),
    ),
    _flag_case("min-duration-nan", "--min-duration", "nan", says=("--min-duration", "nan")),
    _flag_case("min-duration-inf", "--min-duration", "inf", says=("--min-duration",)),
    _flag_case("initial-zero", "--initial", "0", says=("--initial", "a positive integer")),
    _flag_case("budget-nan", "--budget", "nan", says=("--budget",)),
    _flag_case("name-empty", "--name", " ", says=("--name", "empty")),
    # more files a user writes by hand: a key of the wrong table, an empty axis, a scale that
    # does not exist, an option no run has, values no run can take
    _file_case("explore-unknown-key", _explore("min_duration", "nan"), "", "unknown [explore] entry"),
    _file_case("unknown-table", f"{_SPACE}[wat]\na = 1\n", "", "unknown entry 'wat'"),
    _file_case("space-empty-array", "[space]\nbatch_size = []\n", "batch_size", "no values"),
    _file_case("space-bad-scale", '[space]\nbatch_size = "1..4:log3"\n', "batch_size", "unknown scale"),
    _file_case("base-unknown-option", f"{_SPACE}[base]\nnosuch = 1\n", "", "unknown option 'nosuch'"),
    _file_case("base-lr-inf", f"{_SPACE}[base]\nlr = inf\n", "learning_rate", "finite"),
    _file_case("base-batch-zero", f"{_SPACE}[base]\nbatch_size = 0\n", "batch_size", "got 0"),
    _file_case("objectives-unknown", _explore("objectives", '["nosuch"]'), "objectives", "unknown metric"),
    Case(
        "explore-file-missing",
        (*_TINY, "--space-file", "{tmp}/nosuch.toml"),
        USAGE,
        ("--space-file", "nosuch.toml", "No such file"),
    ),
    Case(
        "explore-file-space-lr-nan",
        (*_TINY, "--space-file", "{space}"),
        USAGE,
        ("--lr", "nan"),
        setup=_space_file("[space]\nlr = [nan]\n"),
    ),
    # flags: what a user types from memory
    _flag_case("unknown-axis", "--space", "nosuch=1..4", says=("--space", "unknown option 'nosuch'")),
    Case("explore-flag-axis-zero", (*_TINY, "--space", "batch_size=0..4"), USAGE, ("--batch-size", "got 0")),
    Case("explore-flag-axis-word", (*_TINY, "--space", "batch_size=abc"), USAGE, ("--space", "'abc'")),
    Case("explore-flag-range-reversed", (*_TINY, "--space", "batch_size=4..1"), USAGE, ("4..1", "empty")),
    _flag_case("axis-twice", "--space", "batch_size=2..8", says=("batch_size is given twice",)),
    _flag_case("objective-unknown", "--objective", "speed", says=("--objective", "unknown metric 'speed'")),
    _flag_case("objective-direction", "--objective", "mfu:up", says=("--objective", "max, min or auto")),
    _flag_case("budget-zero", "--budget", "0", says=("--budget", "'0'")),
    _flag_case("constraint-unknown", "--constraint", "speed<3", says=("--constraint", "unknown metric")),
    _flag_case("seed-negative", "--seed", "-1", says=("--seed", "got -1")),
    Case("explore-flag-no-space", _TINY, USAGE, ("--space", "the search space is empty")),
    # what bounded the run: --steps, not the default duration
    Case(
        "explore-label-steps",
        (*_TINY, "--space", "batch_size=1,2", "--budget", "1", "--initial", "1"),
        OK,
        check=_labelled_by_steps,
    ),
]
