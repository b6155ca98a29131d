"""Files: result files and exports that are binary, empty, truncated, of a newer schema, with
strings where numbers belong, NaN or infinity, or an id like ../../etc/passwd.

Every reader (import, show, pareto, report, plot, compare) validates a Result the same way: a bad
file is exit 2 and one line naming it, and nothing is imported from it; the store is unchanged.
"""

from __future__ import annotations

import json

from hostile.case import OK, RUN_A, USAGE, Case
from hostile.setups import field, good_result, jsonl, record, result_file, summary, without

_TRUNCATED = json.dumps(good_result(), indent=2)[:700].encode()


def _overflowing() -> bytes:
    """A result whose samples_per_sec is the literal 1e999 (Python's json reads it as inf)."""
    data = good_result()
    data["summary"]["samples_per_sec"] = 123456.789
    return json.dumps(data).replace("123456.789", "1e999").encode()


# name -> (set-up, fragment of the error line, what fixes it today)
_BAD_FILES = {
    "binary": (result_file("bad", raw=bytes(range(256)) * 4), "bad.json", None),
    "empty": (result_file("bad", raw=b""), "bad.json", None),
    "truncated": (result_file("bad", raw=_TRUNCATED), "bad.json", None),
    "json-array": (result_file("bad", raw=b"[1, 2, 3]\n"), "bad.json", None),
    "json-number": (result_file("bad", raw=b"42\n"), "bad.json", None),
    "no-schema-version": (result_file("bad", without("schema_version")), "schema_version", None),
    "schema-version-newer": (result_file("bad", field(schema_version=99)), "upgrade", None),
    "schema-version-string": (result_file("bad", field(schema_version="4")), "schema_version", None),
    "no-summary": (result_file("bad", without("summary")), "summary", None),
    "summary-unknown-field": (result_file("bad", summary(speedup=2)), "speedup", None),
    "samples-per-sec-string": (
        result_file("bad", summary(samples_per_sec="fast")),
        "samples_per_sec",
        None,
    ),
    "samples-per-sec-nan": (
        result_file("bad", summary(samples_per_sec=float("nan"))),
        "samples_per_sec",
        None,
    ),
    "samples-per-sec-inf": (
        result_file("bad", summary(samples_per_sec=float("inf"))),
        "samples_per_sec",
        None,
    ),
    "samples-per-sec-huge-literal": (
        result_file("bad", raw=_overflowing()),
        "samples_per_sec",
        None,
    ),
    "batch-size-negative": (result_file("bad", field(batch_size=-8)), "batch_size", None),
    "batch-size-string": (result_file("bad", field(batch_size="8")), "batch_size", None),
    "run-id-path": (result_file("bad", field(run_id="../../etc/passwd")), "run_id", None),
    "run-id-empty": (result_file("bad", field(run_id="")), "run_id", None),
    "run-id-number": (result_file("bad", field(run_id=12345)), "run_id", None),
    "intervals-not-a-list": (result_file("bad", field(intervals=5)), "intervals", None),
    "interval-a-string": (result_file("bad", field(intervals=["fast"])), "intervals", None),
    "config-a-string": (result_file("bad", field(config="fast")), "config", None),
    "environment-null": (result_file("bad", field(environment=None)), "environment", None),
    "warnings-a-string": (result_file("bad", field(warnings="none")), "warnings", None),
    "deeply-nested": (result_file("bad", raw=b"[" * 200_000 + b"]" * 200_000), "bad.json", None),
}


def _reader_cases(command: str, argv: tuple[str, ...], names: tuple[str, ...]) -> list[Case]:
    cases = []
    for name in names:
        setup, fragment, mechanism = _BAD_FILES[name]
        cases.append(
            Case(
                f"{command}-{name}",
                (*argv, "{bad}") if command != "compare" else (*argv, "{bad}", "{result}"),
                USAGE,
                (fragment,),
                setup=setup,
                watch={"bad": "same", "result": "same"},
                xfail=mechanism,
            )
        )
    return cases


_EVERY = tuple(_BAD_FILES)
_SOME = (
    "binary",
    "truncated",
    "schema-version-newer",
    "samples-per-sec-string",
    "samples-per-sec-inf",
    "run-id-path",
    "config-a-string",
)

CASES = [
    *_reader_cases("import", ("import",), _EVERY),
    *_reader_cases("show", ("show",), _SOME),
    *_reader_cases("pareto", ("pareto",), _SOME),
    *_reader_cases("report", ("report", "--out", "{tmp}/r.html"), ("samples-per-sec-string", "binary")),
    *_reader_cases(
        "plot", ("plot", "throughput", "--out", "{tmp}/p.png"), ("samples-per-sec-string", "binary")
    ),
    *_reader_cases("compare", ("compare",), ("samples-per-sec-string", "schema-version-newer")),
    # exports (JSON lines): all or nothing, the bad line named
    Case(
        "import-jsonl-one-bad-line",
        ("import", "{export}"),
        USAGE,
        ("line 2",),
        setup=jsonl("export", record("dddd00000004"), "{not json", record("eeee00000005")),
        watch={"export": "same"},
    ),
    Case(
        "import-jsonl-one-bad-value",
        ("import", "{export}"),
        USAGE,
        ("line 2", "samples_per_sec"),
        setup=jsonl("export", record("dddd00000004"), record("eeee00000005", samples_per_sec="fast")),
        watch={"export": "same"},
    ),
    Case(
        "import-jsonl-tags-not-a-list",
        ("import", "{export}"),
        USAGE,
        ("tags",),
        setup=jsonl("export", {**record("dddd00000004"), "tags": "nightly"}),
        watch={"export": "same"},
    ),
    Case(
        "import-jsonl-empty-tag",
        ("import", "{export}"),
        USAGE,
        ("tag",),
        setup=jsonl("export", {**record("dddd00000004"), "tags": [""]}),
        watch={"export": "same"},
    ),
    Case(
        "import-good-and-bad-files",
        ("import", "{result}", "{bad}"),
        USAGE,
        ("bad.json",),
        setup=result_file("bad", summary(samples_per_sec="fast")),
        watch={"bad": "same"},
    ),
    Case("import-twice-keeps-one", ("import", "{result}", "{result}"), OK, watch={"result": "same"}),
    Case(
        "pareto-ref-file-and-run",
        ("pareto", "{bad}", RUN_A),
        USAGE,
        ("bad.json",),
        setup=result_file("bad", raw=b"\x00\x01"),
    ),
]
