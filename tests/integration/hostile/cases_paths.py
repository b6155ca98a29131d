"""Paths: where a command writes (--out of run, export, report, plot; --store; --checkpoint-dir;
--tensorboard; data make -o) and reads (--data, files named as runs).

An --out that is a symlink is written through (the link stays a link); a FIFO or a character
device (/dev/null, /dev/stdout) is written into, never replaced by a regular file; `-` is stdout;
a full disk is one error line. The machine's own /dev is never touched: the cases use private
device nodes and links (tests/integration/hostile/setups.py).
"""

from __future__ import annotations

from hostile.case import FAILED, MARKED_RUN, OK, RUN, RUN_A, TINY, USAGE, Case, combine
from hostile.problems import user_problem
from hostile.setups import (
    device_node,
    fifo,
    folder,
    named,
    plain_file,
    stdout_link,
    symlink,
)

RUN_TINY = (*RUN, *TINY)


def _no_dash_file(ws, outcome) -> list[str]:  # type: ignore[no-untyped-def]
    return ["a file named '-' was written"] if (ws.root / "-").exists() else []


def _outs(command: tuple[str, ...], form: str, tag: str, suffix: str) -> list[Case]:
    """The --out targets every writing command must respect (named with the command's suffix);
    each command checks its --out before working, naming the flag."""
    return [
        Case(
            f"{tag}-out-symlink",
            (*command, "--out", "{out_link}"),
            OK,
            setup=symlink("out_link", f"runs/run-42{suffix}", file=f"latest{suffix}"),
            watch={"out_link": form},
        ),
        Case(
            f"{tag}-out-dangling-symlink",
            (*command, "--out", "{out_link}"),
            OK,
            setup=symlink("out_link", f"runs/next{suffix}", content=None, file=f"latest{suffix}"),
            watch={"out_link": form},
        ),
        Case(
            f"{tag}-out-fifo",
            (*command, "--out", "{out_fifo}"),
            OK,
            setup=fifo("out_fifo", f"pipe{suffix}"),
            watch={"out_fifo": form},
        ),
        Case(
            f"{tag}-out-dev-null",
            (*command, "--out", "{null}"),
            OK,
            setup=device_node("null", 3, f"null{suffix}"),
            watch={"null": form},
        ),
        Case(
            f"{tag}-out-dev-full",
            (*command, "--out", "{full}"),
            FAILED,
            ("No space left",),
            setup=device_node("full", 7, f"full{suffix}"),
            watch={"full": form},
        ),
        Case(
            f"{tag}-out-folder",
            (*command, "--out", "{tmp}"),
            USAGE,
            ("--out",),
        ),
        Case(
            f"{tag}-out-in-read-only-folder",
            (*command, "--out", "{locked}/x" + suffix),
            USAGE,
            ("--out",),
            setup=folder("locked", 0o555),
            unprivileged=True,
        ),
        Case(
            f"{tag}-out-under-a-file",
            (*command, "--out", "{blocker}/x" + suffix),
            USAGE,
            ("--out",),
            setup=plain_file("blocker"),
        ),
    ]


CASES = [
    *_outs(RUN_TINY, "json", "run", ".json"),
    *_outs(("export",), "jsonl", "export", ".jsonl"),
    *_outs(("export", "--format", "csv"), "csv", "export-csv", ".csv"),
    *_outs(("report",), "html", "report", ".html"),
    *_outs(("plot", "throughput"), "png", "plot", ".png"),
    Case(
        "run-out-dash-is-stdout",
        (*RUN_TINY, "--out", "-"),
        OK,
        out_json=True,
        check=_no_dash_file,
    ),
    Case(
        "export-out-dash-is-stdout",
        ("export", "--out", "-"),
        OK,
        out=(RUN_A,),
        check=_no_dash_file,
    ),
    Case(
        "run-out-new-folders",
        (*RUN_TINY, "--out", "{deep}"),
        OK,
        setup=named("deep", "a/b/c/run.json"),
        watch={"deep": "json"},
    ),
    # a name too long for the file system: refused before the run, not after it
    Case(
        "run-out-name-too-long",
        (*MARKED_RUN, "--out", "{tmp}/" + "r" * 300 + ".json"),
        USAGE,
        ("--out",),
        setup=user_problem,
        before_measuring=True,
    ),
    # --store
    Case("store-is-a-folder", ("runs", "--store", "{tmp}"), USAGE, ("--store",)),
    Case(
        "store-under-a-file",
        (*RUN_TINY, "--store", "{blocker}/s.db"),
        USAGE,
        ("--store",),
        setup=plain_file("blocker"),
    ),
    Case("store-missing-for-reading", ("runs", "--store", "{tmp}/none.db"), USAGE, ("none.db",)),
    Case(
        "store-dev-null",
        ("runs", "--store", "{null}"),
        USAGE,
        ("--store",),
        setup=device_node("null", 3),
        watch={"null": "same"},
    ),
    Case(
        "store-symlink-is-followed",
        (*RUN_TINY, "--store", "{store_link}"),
        OK,
        setup=lambda ws: ws.path("store_link", "store-link.db").symlink_to(ws.paths["store"]),
        watch={"store_link": "db"},
    ),
    # --checkpoint-dir and --tensorboard: unusable folders refused before the run
    Case(
        "checkpoint-dir-dev-null",
        (*RUN_TINY, "--checkpoint-every", "1", "--checkpoint-dir", "{null}"),
        USAGE,
        ("--checkpoint-dir",),
        setup=device_node("null", 3),
    ),
    Case(
        "checkpoint-dir-is-a-file",
        (*RUN_TINY, "--checkpoint-every", "1", "--checkpoint-dir", "{blocker}"),
        USAGE,
        ("--checkpoint-dir",),
        setup=plain_file("blocker"),
    ),
    Case(
        "checkpoint-dir-read-only",
        (*MARKED_RUN, "--checkpoint-every", "1", "--checkpoint-dir", "{locked}"),
        USAGE,
        ("--checkpoint-dir",),
        setup=combine(user_problem, folder("locked", 0o555)),
        unprivileged=True,
        before_measuring=True,
    ),
    Case(
        "tensorboard-is-a-file",
        (*RUN_TINY, "--tensorboard", "{blocker}"),
        USAGE,
        ("--tensorboard",),
        setup=plain_file("blocker"),
    ),
    Case(
        "tensorboard-read-only",
        (*MARKED_RUN, "--tensorboard", "{locked}/tb"),
        USAGE,
        ("--tensorboard",),
        setup=combine(user_problem, folder("locked", 0o555)),
        unprivileged=True,
        before_measuring=True,
    ),
    # --profile: an unusable folder refused before the run
    Case(
        "profile-is-a-file",
        (*MARKED_RUN, "--profile", "{blocker}"),
        USAGE,
        ("--profile",),
        setup=combine(user_problem, plain_file("blocker")),
        before_measuring=True,
    ),
    Case(
        "profile-read-only",
        (*MARKED_RUN, "--profile", "{locked}/profile"),
        USAGE,
        ("--profile",),
        setup=combine(user_problem, folder("locked", 0o555)),
        unprivileged=True,
        before_measuring=True,
    ),
    Case(
        "generate-profile-read-only",
        ("generate", "-p", "transformer", "--size", "debug", "--profile", "{locked}/profile"),
        USAGE,
        ("--profile",),
        setup=folder("locked", 0o555),
        unprivileged=True,
    ),
    # --data and data make -o
    Case("data-missing", (*RUN_TINY, "--data", "{tmp}/no-such-data"), USAGE, ("no-such-data",)),
    Case(
        "data-is-a-file", (*RUN_TINY, "--data", "{blocker}"), USAGE, ("--data",), setup=plain_file("blocker")
    ),
    Case(
        "data-empty-folder",
        (*RUN_TINY, "--data", "{empty}"),
        USAGE,
        ("index.json",),
        setup=folder("empty"),
    ),
    Case("data-info-missing", ("data", "info", "{tmp}/no-such-data"), USAGE, ("no-such-data",)),
    Case(
        "data-make-into-full-folder",
        ("data", "make", "-p", "fc_mnist", "--size", "debug", "--samples", "8", "-o", "{full_dir}"),
        USAGE,
        ("--out",),
        setup=folder("full_dir", files=("keep.txt",)),
        watch={"full_dir": "same"},
    ),
    Case(
        "data-make-read-only-folder",
        ("data", "make", "-p", "fc_mnist", "--size", "debug", "--samples", "8", "-o", "{locked}/d"),
        USAGE,
        ("--out",),
        setup=folder("locked", 0o555),
        unprivileged=True,
    ),
    Case(
        "data-make-dev-null",
        ("data", "make", "-p", "fc_mnist", "--size", "debug", "--samples", "8", "-o", "{null}"),
        USAGE,
        ("--out",),
        setup=device_node("null", 3),
        watch={"null": "same"},
    ),
    # runs named by path
    Case("show-missing-file-or-id", ("show", "{tmp}/nothing.json"), USAGE, ("nothing.json",)),
    Case("show-unknown-run-id", ("show", "ffff99999999"), USAGE, ("ffff99999999",)),
    Case("show-a-folder", ("show", "{tmp}"), USAGE, ()),
    Case("show-etc-passwd", ("show", "/etc/passwd"), USAGE, ("/etc/passwd",)),
    Case("import-missing-file", ("import", "{tmp}/nothing.jsonl"), USAGE, ("nothing.jsonl",)),
    Case("import-a-folder", ("import", "{tmp}"), USAGE, ()),
    Case(
        "import-dev-null",
        ("import", "{null}"),
        USAGE,
        ("empty",),
        setup=device_node("null", 3),
    ),
    Case("compare-unknown-ref", ("compare", RUN_A, "nosuch"), USAGE, ("nosuch",)),
    Case(
        "run-out-private-dev-stdout",
        (*RUN_TINY, "--out", "{stdout_link}"),
        OK,
        setup=stdout_link,
        driver="proc",
        out_json=True,
        watch={"stdout_link": "link"},
    ),
]
