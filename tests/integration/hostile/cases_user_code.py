"""User code: a problem file that exits or raises at import, has a SyntaxError, or whose
build_model, make_batch, loss or parameter_count misbehave.

Loading the file is part of reading --problem: a failure there is bad input (exit 2). A failure
inside the user's methods fails the run (exit 1). Either way one line names the user's file and
line, never flowrate's frames or `<frozen importlib._bootstrap>`; sys.exit(0) is never a pass.
"""

from __future__ import annotations

from hostile.case import FAILED, OK, TINY, USAGE, Case
from hostile.problems import readme_example, user_file, user_line, user_problem
from hostile.setups import folder

_GOOD_TAIL = """

import flowrate


def make():
    return flowrate.Problem()
"""


def _at_import(name: str, source: str | bytes, fragments: tuple[str, ...], xfail: str | None = None) -> Case:
    stem = name.replace("-", "_")
    return Case(
        f"user-file-{name}",
        ("run", "-p", f"{{{stem}}}:make", *TINY),
        USAGE,
        (f"{stem}.py", *fragments),
        setup=user_file(f"{stem}.py", source),
        xfail=xfail,
    )


def _method(
    how: str, code: int, fragments: tuple[str, ...], xfail: str | None = None, command: str = "run"
) -> Case:
    return Case(
        f"user-{command}-{how.replace('_', '-')}",
        (command, "-p", f"{{user}}:{how}", *TINY),
        code,
        fragments,
        setup=user_problem,
        xfail=xfail,
    )


CASES = [
    # issue 5: sys.exit(0) at import made `flowrate run` exit 0 with no output
    _at_import("exit-zero-at-import", "import sys\nsys.exit(0)\n" + _GOOD_TAIL, ("exit",)),
    _at_import("exit-three-at-import", "import sys\nsys.exit(3)\n" + _GOOD_TAIL, ("exit",)),
    _at_import(
        "exit-message-at-import", "import sys\nsys.exit('no GPU here')\n" + _GOOD_TAIL, ("no GPU here",)
    ),
    _at_import(
        "raises-at-import",
        "x = 1\nraise RuntimeError('configured wrong')\n" + _GOOD_TAIL,
        ("raises_at_import.py:2", "configured wrong"),
    ),
    # issue 17: the SyntaxError names the user's file and line
    _at_import("syntax-error", "x = 1\n\ndef make(:\n    pass\n", ("syntax_error.py:3",)),
    _at_import("missing-module", "import nosuchmodule_xyz\n" + _GOOD_TAIL, ("nosuchmodule_xyz",)),
    _at_import("nul-bytes", b"x = 1\x00\n", ()),
    _at_import("not-utf8", b"# caf\xe9\nx = 1\n", ()),
    Case(
        "user-file-is-a-folder",
        ("run", "-p", "{pkg}:make", *TINY),
        USAGE,
        ("pkg.py",),
        setup=folder("pkg", file="pkg.py"),
    ),
    Case(
        "user-file-unreadable",
        ("run", "-p", "{secret}:make", *TINY),
        USAGE,
        ("secret.py",),
        setup=user_file("secret.py", _GOOD_TAIL, mode=0),
        unprivileged=True,
    ),
    Case("user-factory-empty", ("run", "-p", "{user}:", *TINY), USAGE, ("--problem",), setup=user_problem),
    # the user's methods: the run fails, naming the file and line
    _method("build_raises", FAILED, (user_line("build_raises"), "the model cannot be built")),
    _method("build_exits", FAILED, (user_line("build_exits"),)),
    _method("build_not_module", FAILED, ("build_model",)),
    _method("batch_raises", FAILED, (user_line("batch_raises"), "no batch today")),
    _method("loss_raises", FAILED, (user_line("loss_raises"), "label")),
    _method("loss_vector", FAILED, ("scalar",)),
    _method("loss_string", FAILED, ("loss",)),
    _method("loss_none", FAILED, ("loss",)),
    _method("loss_shapes", FAILED, (user_line("loss_shapes"),)),
    _method("loss_exits", FAILED, (user_line("loss_exits"),)),
    _method("loss_recursion", FAILED, ("RecursionError",)),
    _method("count_raises", FAILED, (user_line("count_raises"),)),
    _method("count_string", FAILED, ("parameter_count",)),
    Case(
        "user-run-blocks-garbage-streaming",
        ("run", "-p", "{user}:blocks_garbage", *TINY, "--execution", "streaming"),
        (USAGE, FAILED),
        ("blocks",),
        setup=user_problem,
    ),
    _method("loss_string", FAILED, ("loss",), command="check"),
    _method("build_raises", FAILED, (user_line("build_raises"),), command="check"),
    # issue 15: the own-model guide's example (docs/guides/own-model.md) runs clean (no warning
    # that its FLOPs are off)
    Case(
        "readme-my-model-runs-clean",
        ("run", "-p", "{my_model}:make_problem", *TINY, "--precision", "bf16"),
        OK,
        setup=readme_example,
        # neither FLOP warning: "model FLOPs (…) are N% above/below …" nor "saw no FLOPs"
        not_says=("model FLOPs (", "saw no FLOPs"),
    ),
]
