"""Flags: unknown, misspelt, missing their value, a choice that is not one, flags that do not go
together, and environment variables holding nonsense."""

from __future__ import annotations

from hostile.case import RUN, RUN_A, TINY, USAGE, Case
from hostile.setups import env, peaks_file

CASES = [
    Case("unknown-command", ("benchmark",), USAGE, ("benchmark",)),
    Case("misspelt-command", ("rn", *RUN[1:]), USAGE, ("rn",)),
    Case("unknown-flag", (*RUN, "--turbo"), USAGE, ("--turbo",)),
    Case("misspelt-flag", (*RUN, "--batchsize", "4"), USAGE, ("--batchsize", "--batch-size")),
    Case("single-dash-long-flag", (*RUN, "-steps", "2"), USAGE, ("-s",)),
    Case("missing-value-at-end", (*RUN, "--steps"), USAGE, ("--steps",)),
    Case("flag-as-value", (*RUN, "--batch-size", "--steps", "2"), USAGE, ("--batch-size",)),
    Case("extra-argument", (*RUN, "now"), USAGE, ("now",)),
    Case("runs-unknown-flag", ("runs", "--newest"), USAGE, ("--newest",)),
    Case("show-without-run", ("show",), USAGE, ("RUN",)),
    Case("import-without-file", ("import",), USAGE, ("FILE",)),
    Case("compare-one-run", ("compare", RUN_A), USAGE, ("B",)),
    Case("data-unknown-subcommand", ("data", "shuffle"), USAGE, ("shuffle",)),
    Case("plot-unknown-kind", ("plot", "histogram"), USAGE, ("histogram",)),
    Case("mode-not-a-choice", (*RUN, "--mode", "sideways"), USAGE, ("--mode", "sideways")),
    Case("precision-not-a-choice", (*RUN, "--precision", "fp8"), USAGE, ("--precision", "fp8")),
    Case("optimizer-not-a-choice", (*RUN, "--optimizer", "lion"), USAGE, ("--optimizer", "lion")),
    Case("execution-not-a-choice", (*RUN, "--execution", "remote"), USAGE, ("--execution",)),
    Case("device-unknown", (*RUN, "--device", "tpu"), USAGE, ("--device", "tpu")),
    Case("device-bad-index", (*RUN, "--device", "cuda:x"), USAGE, ("--device",)),
    Case("unknown-problem", ("run", "-p", "tranformer"), USAGE, ("--problem", "did you mean 'transformer'")),
    Case("unknown-size", ("run", "-p", "fc_mnist", "--size", "huge"), USAGE, ("--size", "huge")),
    Case("empty-problem", ("run", "-p", ""), USAGE, ("--problem",)),
    # issue 17: the problem option is -O nosuch=3, not a flag --nosuch
    Case(
        "unknown-problem-option",
        (*RUN, "-O", "nosuch=3"),
        USAGE,
        ("-O", "nosuch"),
        not_says=("--nosuch",),
    ),
    Case("problem-option-without-value", (*RUN, "-O", "hidden"), USAGE, ("KEY=VALUE",)),
    Case("problem-option-not-integer", (*RUN, "-O", "hidden=wide"), USAGE, ("hidden", "wide")),
    Case("problem-option-negative", (*RUN, "-O", "hidden=-5"), USAGE, ("hidden",)),
    # issue 17: --sample-shape is what the user typed; --seq-len is bert's name for it
    Case(
        "sample-shape-blames-its-alias",
        ("run", "-p", "bert-base", "--size", "debug", "--sample-shape", "100000"),
        USAGE,
        ("--sample-shape",),
        not_says=("--seq-len",),
    ),
    Case("shape-flag-for-another-family", (*RUN, "--seq-len", "64"), USAGE, ("--seq-len",)),
    Case("no-store-with-tag", (*RUN, *TINY, "--no-store", "-t", "x"), USAGE, ("--no-store",)),
    Case(
        "checkpoint-every-without-dir", (*RUN, *TINY, "--checkpoint-every", "1"), USAGE, ("--checkpoint-dir",)
    ),
    Case("recompute-when-resident", (*RUN, *TINY, "--recompute"), USAGE, ("--recompute",)),
    Case(
        "compile-when-streaming",
        (*RUN, *TINY, "--compile", "--execution", "streaming"),
        USAGE,
        ("--compile",),
    ),
    Case("loader-flag-without-data", (*RUN, *TINY, "--prefetch", "4"), USAGE, ("--prefetch", "--data")),
    Case(
        "batch-and-global-batch",
        (*RUN, *TINY, "-b", "4", "--global-batch-size", "8"),
        USAGE,
        ("--global-batch-size",),
    ),
    Case("runs-mode-not-a-choice", ("runs", "--mode", "sideways"), USAGE, ("--mode",)),
    Case("runs-since-not-a-date", ("runs", "--since", "yesterday"), USAGE, ("--since",)),
    Case("runs-until-not-a-date", ("runs", "--until", "someday"), USAGE, ("--until",)),
    Case("runs-refs-and-filters", ("export", RUN_A, "--tag", "nightly"), USAGE, ("not both",)),
    Case("pareto-unknown-objective", ("pareto", "--objective", "nosuch"), USAGE, ("nosuch",)),
    Case("pareto-bad-direction", ("pareto", "--objective", "mfu:sideways"), USAGE, ("sideways",)),
    Case("pareto-by-unknown-option", ("pareto", "--by", "colour"), USAGE, ("--by colour",)),
    Case("plot-unknown-metric", ("plot", "throughput", "--metric", "nosuch"), USAGE, ("nosuch",)),
    Case("compare-unknown-test", ("compare", RUN_A, RUN_A, "--test", "ttest"), USAGE, ("--test",)),
    Case("export-unknown-format", ("export", "--format", "xml"), USAGE, ("--format",)),
    Case("sweep-grid-without-values", ("sweep", "-p", "fc_mnist", "-g", "batch_size"), USAGE, ("--grid",)),
    Case(
        "sweep-grid-unknown-key",
        ("sweep", "-p", "fc_mnist", "-g", "colour=1,2", "--dry-run"),
        USAGE,
        ("colour",),
    ),
    Case("sweep-without-grid", ("sweep", "-p", "fc_mnist", "--dry-run"), USAGE, ("--grid",)),
    Case(
        "estimate-unknown-target",
        ("estimate", "-p", "fc_mnist", "--size", "debug", "--target", "tpu9"),
        USAGE,
        ("tpu9",),
    ),
    # issue 9: a bad FLOWRATE_PEAKS is bad input, named
    Case(
        "peaks-file-missing",
        (*RUN, *TINY),
        USAGE,
        ("FLOWRATE_PEAKS",),
        setup=env(FLOWRATE_PEAKS="{tmp}/no-such-peaks.json"),
    ),
    Case(
        "peaks-file-not-json",
        (*RUN, *TINY),
        USAGE,
        ("FLOWRATE_PEAKS",),
        setup=peaks_file("{oops"),
    ),
    Case(
        "peaks-file-binary",
        (*RUN, *TINY),
        USAGE,
        ("FLOWRATE_PEAKS",),
        setup=peaks_file(b"\xff\xfe\x00\x81"),
    ),
    Case(
        "peaks-entry-wrong-type",
        (*RUN, *TINY),
        USAGE,
        ("FLOWRATE_PEAKS",),
        setup=peaks_file('[{"name": "x", "match": "EPYC", "dense_flops": {"fp32": "fast"}, "source": "me"}]'),
    ),
    Case("store-env-is-a-folder", ("runs",), USAGE, ("{tmp}",), setup=env(FLOWRATE_STORE="{tmp}")),
]
