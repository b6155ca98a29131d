"""Numbers: negative, zero, beyond 64 bits, inf, nan and words, for every numeric flag.

Each is refused at parse time with exit 2 and the flag's name, before a model is built; a value
that is merely large (a step count no run finishes, a batch beyond any memory) needs a bound.
Cases that hang today are stopped after a few seconds (their fix answers in milliseconds).
"""

from __future__ import annotations

from hostile.case import HUGE, OK, RUN, TINY, USAGE, Case, combine
from hostile.setups import dataset, folder

HANG_S = 3.0  # a bad value is refused in milliseconds; a run that ignores it is stopped here

# flag -> what else the run needs for the flag to apply
_NEEDS: dict[str, tuple[str, ...]] = {
    "--loader-workers": ("--data", "{data}"),
    "--prefetch": ("--data", "{data}"),
    "--shuffle-buffer": ("--data", "{data}"),
    "--checkpoint-every": ("--checkpoint-dir", "{tmp}/ck"),
    "--max-batch-size": ("-b", "auto"),
    "--clip-grad-norm": (),
}
_TRANSFORMER = {"--seq-len", "--layers", "--heads", "--hidden", "--vocab-size"}
_SETUP = {name: dataset() for name in ("--loader-workers", "--prefetch", "--shuffle-buffer")}


def _argv(flag: str, value: str) -> tuple[str, ...]:
    problem = ("run", "-p", "transformer", "--size", "debug") if flag in _TRANSFORMER else RUN
    if flag == "--image-size":
        problem = ("run", "-p", "resnet50", "--size", "debug")
    timing = () if flag in ("--steps", "--preheat", "--duration", "--min-steps") else TINY
    if flag == "--preheat":
        timing = ("--steps", "2")
    return (*problem, *timing, *_NEEDS.get(flag, ()), flag, value)


def _case(
    flag: str,
    label: str,
    value: str,
    code: int = USAGE,
    xfail: str | None = None,
    hang: bool = False,
    driver: str = "in",
) -> Case:
    return Case(
        f"{flag[2:]}-{label}",
        _argv(flag, value),
        code,
        () if code == OK else (flag,),
        setup=_SETUP.get(flag),
        driver=driver,
        timeout_s=HANG_S if hang else 120.0,
        xfail=xfail,
    )


CASES = [
    # --batch-size
    _case("--batch-size", "negative", "-4"),
    _case("--batch-size", "zero", "0"),
    _case("--batch-size", "huge", HUGE),
    _case("--batch-size", "word", "lots"),
    _case("--batch-size", "fraction", "2.5"),
    # --steps
    _case("--steps", "negative", "-1"),
    _case("--steps", "zero", "0"),
    _case("--steps", "huge", HUGE, hang=True),
    _case("--steps", "word", "many"),
    _case("--steps", "inf", "inf"),
    # --duration (seconds)
    _case("--duration", "negative", "-5"),
    _case("--duration", "zero", "0"),
    _case("--duration", "inf", "inf", hang=True),
    _case("--duration", "nan", "nan"),
    _case("--duration", "huge", HUGE, hang=True),
    _case("--duration", "word", "forever"),
    # --min-steps
    _case("--min-steps", "zero", "0"),
    _case("--min-steps", "huge", HUGE, hang=True),
    # --threads (100000 crashes the process: tests/integration/hostile/cases_process.py)
    _case("--threads", "negative", "-2"),
    _case("--threads", "zero", "0"),
    _case("--threads", "huge", HUGE),
    _case("--threads", "word", "all"),
    # --preheat (0 is valid: no warm-up)
    _case("--preheat", "negative", "-1"),
    _case("--preheat", "zero-is-valid", "0", code=OK),
    _case("--preheat", "huge", HUGE, hang=True),
    _case("--preheat", "word", "some"),
    # --sample-every
    _case("--sample-every", "negative", "-1"),
    _case("--sample-every", "zero", "0"),
    _case("--sample-every", "huge", HUGE),
    _case("--sample-every", "word", "often"),
    # --target-interval (seconds)
    _case("--target-interval", "zero", "0"),
    _case("--target-interval", "inf", "inf"),
    _case("--target-interval", "nan", "nan"),
    # --smoothing: a factor in [0, 1)
    _case("--smoothing", "negative", "-0.1"),
    _case("--smoothing", "zero-is-valid", "0", code=OK),
    _case("--smoothing", "one", "1"),
    _case("--smoothing", "huge", HUGE),
    _case("--smoothing", "inf", "inf"),
    _case("--smoothing", "nan", "nan"),
    _case("--smoothing", "word", "some"),
    # --lr
    _case("--lr", "negative", "-0.001"),
    _case("--lr", "zero", "0"),
    _case("--lr", "inf", "inf"),
    _case("--lr", "nan", "nan"),
    _case("--lr", "word", "fast"),
    # --price-per-hour and --energy-price: finite and above 0
    *(
        _case(flag, label, value)
        for flag in ("--price-per-hour", "--energy-price")
        for label, value in (
            ("negative", "-1"),
            ("zero", "0"),
            ("inf", "inf"),
            ("nan", "nan"),
            ("word", "dear"),
        )
    ),
    # --to-solution: a positive amount and a unit
    *(
        _case("--to-solution", label, value)
        for label, value in (
            ("no-unit", "2e12"),
            ("bad-unit", "3hours"),
            ("epochs-without-data", "3epochs"),
            ("zero", "0tokens"),
            ("inf", "inftokens"),
        )
    ),
    # --loader-workers (0 is valid: read in the training thread)
    _case("--loader-workers", "negative", "-1"),
    _case("--loader-workers", "zero-is-valid", "0", code=OK),
    _case("--loader-workers", "huge", HUGE),
    _case("--loader-workers", "word", "few"),
    # --prefetch
    _case("--prefetch", "negative", "-1"),
    _case("--prefetch", "zero", "0"),
    # stuck in loader clean-up that no alarm can interrupt: a process of its own, killed at the limit
    Case(
        "prefetch-huge",
        _argv("--prefetch", HUGE),
        USAGE,
        ("--prefetch",),
        setup=dataset(),
        driver="proc",
        timeout_s=15,
    ),
    # --shuffle-buffer
    _case("--shuffle-buffer", "zero", "0"),
    _case("--shuffle-buffer", "huge", HUGE),
    # --repeat (huge starts processes without end: tests/integration/hostile/cases_process.py)
    _case("--repeat", "negative", "-1"),
    _case("--repeat", "zero", "0"),
    _case("--repeat", "word", "twice"),
    # --max-batch-size (where --batch-size auto starts)
    _case("--max-batch-size", "zero", "0"),
    _case("--max-batch-size", "huge", HUGE),
    # --global-batch-size
    _case("--global-batch-size", "zero", "0"),
    _case("--global-batch-size", "huge", HUGE),
    # --checkpoint-every
    _case("--checkpoint-every", "zero", "0"),
    _case("--checkpoint-every", "negative", "-3"),
    # --seed
    _case("--seed", "negative", "-1"),
    _case("--seed", "huge", HUGE),
    _case("--seed", "word", "lucky"),
    # shapes
    _case("--seq-len", "zero", "0"),
    _case("--seq-len", "huge", HUGE),
    _case("--layers", "negative", "-2"),
    _case("--layers", "huge", HUGE, hang=True),
    _case("--heads", "zero", "0"),
    _case("--hidden", "huge", HUGE),
    _case("--vocab-size", "zero", "0"),
    _case("--vocab-size", "huge", HUGE),
    _case("--image-size", "zero", "0"),
    _case("--image-size", "huge", HUGE),
    # floats of streaming, clipping, memory caps and data-parallel waits
    _case("--clip-grad-norm", "negative", "-1"),
    _case("--clip-grad-norm", "nan", "nan"),
    _case("--clip-grad-norm", "inf", "inf"),
    _case("--device-memory-limit", "negative", "-16"),
    _case("--device-memory-limit", "nan", "nan"),
    _case("--dist-timeout", "zero", "0"),
    _case("--dist-timeout", "inf", "inf"),
    _case("--dist-timeout", "nan", "nan"),
    # other commands' numbers
    Case("runs-limit-zero", ("runs", "-n", "0"), USAGE, ("--limit",)),
    Case("runs-limit-huge", ("runs", "-n", HUGE), USAGE, ("--limit",)),
    Case(
        "compare-alpha-one", ("compare", "aaaa00000001", "bbbb00000002", "--alpha", "1"), USAGE, ("--alpha",)
    ),
    Case(
        "compare-alpha-nan",
        ("compare", "aaaa00000001", "bbbb00000002", "--alpha", "nan"),
        USAGE,
        ("--alpha",),
    ),
    Case(
        "compare-fail-if-slower-nan",
        ("compare", "aaaa00000001", "bbbb00000002", "--fail-if-slower", "nan"),
        USAGE,
        ("--fail-if-slower",),
    ),
    *(
        Case(
            f"compare-budget-{name}",
            (
                "compare",
                "--run",
                "-p fc_mnist --size debug",
                "-p fc_mnist --size debug",
                "--budget",
                value,
                *more,
            ),
            USAGE,
            says,
        )
        for name, value, more, says in (
            ("not-a-duration", "soon", (), ("--budget", "a duration above 0 like 90s")),
            ("zero", "0s", (), ("--budget", "a duration above 0")),
            (
                "too-small",
                "5s",
                (),
                ("--budget", "too short for a first block and two processes a side", "at least 12s"),
            ),
            ("with-runs", "2m", ("--runs", "5"), ("--budget", "give --budget or --runs, not both")),
        )
    ),
    Case(
        "data-make-samples-zero",
        ("data", "make", "-p", "fc_mnist", "--samples", "0", "-o", "{tmp}/d"),
        USAGE,
        ("--samples",),
    ),
    Case(
        "data-make-shards-more-than-samples",
        (
            "data",
            "make",
            "-p",
            "fc_mnist",
            "--size",
            "debug",
            "--samples",
            "4",
            "--shards",
            "9",
            "-o",
            "{tmp}/d",
        ),
        USAGE,
        ("--shards",),
    ),
    # issue 6: more than the disk holds fails before writing, saying so (not EFBIG's traceback).
    # One shard of 8 PB: beyond any file system's file size, so no byte is written even today.
    Case(
        "data-make-more-than-the-disk",
        (
            "data",
            "make",
            "-p",
            "fc_mnist",
            "--size",
            "debug",
            "--samples",
            "10000000000000",
            "--shards",
            "1",
            "-o",
            "{tmp}/d",
        ),
        USAGE,
        ("--samples",),
    ),
    Case(
        "data-make-samples-huge",
        (
            "data",
            "make",
            "-p",
            "fc_mnist",
            "--size",
            "debug",
            "--samples",
            HUGE,
            "--shards",
            "1",
            "-o",
            "{tmp}/d",
        ),
        USAGE,
        ("--samples",),
    ),
    Case(
        "analyze-input-consumption-nan",
        (
            "analyze-input",
            "-p",
            "fc_mnist",
            "--size",
            "debug",
            "--data",
            "{data}",
            "--consumption-rate",
            "nan",
        ),
        USAGE,
        ("--consumption-rate",),
        setup=dataset(),
    ),
    Case("scaling-nproc-zero", ("scaling", "--nproc", "0", *RUN[1:]), USAGE, ("--nproc",)),
    Case(
        "checkpoint-dir-and-every-huge",
        (*RUN, *TINY, "--checkpoint-every", HUGE, "--checkpoint-dir", "{tmp}/ck"),
        USAGE,
        ("--checkpoint-every",),
        setup=combine(folder("ck")),
    ),
]
