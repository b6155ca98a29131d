"""The Result validator: what it refuses (one line naming the field and the value), what it lets
through, and, by property, that valid records round-trip exactly through a file and the store while
every corruption of one is refused with InvalidResult, never another exception, leaving the store as
it was."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import tempfile
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factories import make_result
from flowrate.errors import FlowrateError
from flowrate.results.schema import SCHEMA_VERSION, IntervalRecord, Result, RunSummary
from flowrate.results.sections import Estimate, Generation, Operators
from flowrate.results.store import Store
from flowrate.results.transfer import read_results, result_file
from flowrate.results.validate import (
    AT_LEAST_0,
    COUNT,
    FLAG,
    INTERVAL,
    INTERVAL_LATER,
    NUMBER,
    RUN_ID,
    SUMMARY,
    SUMMARY_LATER,
    TEXT,
    InvalidResult,
    Kind,
    tag_problem,
    validate_record,
)

# `flowrate import` of a bad record is bad input: exit 2 (InvalidResult is a FlowrateError).
EXIT_BAD_RECORD = 2


def record(**changes: Any) -> dict[str, Any]:
    return make_result(**changes).to_dict()


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidResult) as raised:
        Result.from_dict(data)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 300
    return message


# --- the tables are the dataclasses, field for field ------------------------------------------


def test_the_tables_name_every_field_of_the_summary_and_the_interval() -> None:
    def with_default(cls: type) -> set[str]:
        return {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }

    assert set(SUMMARY) == {f.name for f in dataclasses.fields(RunSummary)}
    assert set(SUMMARY_LATER) == with_default(RunSummary)
    assert set(INTERVAL) == {f.name for f in dataclasses.fields(IntervalRecord)}
    assert set(INTERVAL_LATER) == with_default(IntervalRecord)


# --- examples ----------------------------------------------------------------------------------


def test_what_flowrate_writes_reads_back() -> None:
    for result in (
        make_result(),
        make_result(checkpoint_after=(1, 3), samples_per_joule=2.0, mfu=0.3, final_loss=0.5),
        make_result(interval_rates=[1.0] * 30, warnings=["noisy"], peak_memory_bytes=None),
    ):
        assert Result.from_json(result.to_json()) == result


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["summary"].update(samples_per_sec="fast"), "summary.samples_per_sec must be a finite"),
        (lambda d: d["summary"].update(samples_per_sec=math.nan), "summary.samples_per_sec must be a finite"),
        (
            lambda d: d["summary"].update(cv=math.inf),
            "summary.cv must be null or a finite number >= 0, not inf",
        ),
        (
            lambda d: d["summary"].update(timed_steps=-1),
            "summary.timed_steps must be an integer >= 0, not -1",
        ),
        (lambda d: d["summary"].update(timed_steps=2.5), "summary.timed_steps must be an integer >= 0"),
        (lambda d: d["summary"].update(surprise=1), "summary has an unknown field 'surprise'"),
        (lambda d: d["summary"].pop("cv"), "summary has no 'cv' field"),
        (lambda d: d.update(batch_size=-8), "batch_size must be an integer >= 1, not -8"),
        (lambda d: d.update(batch_size=0), "batch_size must be an integer >= 1, not 0"),
        (lambda d: d.update(batch_size=True), "batch_size must be an integer >= 1, not True"),
        (lambda d: d.update(intervals={}), "intervals must be a list, not {}"),
        (lambda d: d["intervals"].append(3), "intervals[5] must be an object, not 3"),
        (lambda d: d["intervals"][0].pop("seconds"), "intervals[0] has no 'seconds' field"),
        (lambda d: d["intervals"][1].update(loss="low"), "intervals[1].loss must be null or a finite"),
        (lambda d: d["losses"].append("x"), "losses[5] must be a finite number, not 'x'"),
        (lambda d: d["warnings"].append(7), "warnings[0] must be a string of valid Unicode, not 7"),
        (lambda d: d["config"].update(lr=math.inf), "config.lr must be a finite number, not inf"),
        (lambda d: d["problem"].update(name=["x"]), "problem.name must be null or a string"),
        (lambda d: d["environment"].update(device="cpu"), "environment.device must be null or an object"),
        (lambda d: d["environment"]["device"].update(name=3), "environment.device.name must be null or"),
        (lambda d: d["energy"].update(samples_per_joule="many"), "energy.samples_per_joule must be null or"),
        (lambda d: d["problem"].update(name="\ud800"), "problem.name holds text that is not valid Unicode"),
        (lambda d: d.update(run_id="../../etc/passwd"), "never a path, not '../../etc/passwd'"),
        (lambda d: d.update(run_id="/etc/passwd"), "never a path"),
        (lambda d: d.update(run_id="a..b"), "never a path"),
        (lambda d: d.update(run_id="x" * 65), "never a path"),
        (lambda d: d.update(run_id=12), "run_id must be a string of valid Unicode, not 12"),
        (lambda d: d.update(schema_version=SCHEMA_VERSION + 1), "newer than this flowrate reads"),
        (lambda d: d.update(schema_version="4"), "it has no integer schema_version"),
        (lambda d: d.pop("losses"), "it has no 'losses' field"),
        (
            lambda d: d.update(kind="serve"),
            "a serve record must have its 'serving' section, and this one has none",
        ),
        (lambda d: d.update(kind="check"), "a check record must have its 'fidelity' section"),
        (
            lambda d: d.update(serving={"rate": 1.0}),
            "a run record must not hold a serve record's 'serving' section",
        ),
        (
            lambda d: d.update(kind="survey", survey={}, generation={}),
            "a survey record must not hold a generate record's 'generation' section",
        ),
    ],
)
def test_a_field_a_reader_would_trip_on_is_refused_by_name(
    change: Callable[[dict[str, Any]], object], message: str
) -> None:
    data = record()
    change(data)
    assert message in refused(data)


def test_a_long_value_is_cut_in_the_message() -> None:
    data = record()
    data["summary"]["samples_per_sec"] = "fast" * 2000
    message = refused(data)
    assert message.endswith("…") and len(message) < 120


def test_ids_flowrate_and_its_tests_write_are_read(tmp_path: Path) -> None:
    for run_id in ("3fa2c1d4e5f6", "0000000000a1", "bf16bf16bf16", "a", "r100.0", "x_y-z", ""):
        assert Result.from_dict(record(run_id=run_id)).run_id == run_id


def test_a_deeply_nested_record_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidResult, match="nested too deeply"):
        Result.from_json("[" * 100_000 + "]" * 100_000)
    data = record()
    deep: Any = 1.0
    for _ in range(5000):
        deep = [deep]
    data["config"]["deep"] = deep
    Result.from_dict(data)  # deep but finite: fine
    data["config"]["deep"] = [[[math.nan]]]
    assert "config.deep[0][0][0] must be a finite number, not nan" in refused(data)


def test_json_written_by_flowrate_is_strict() -> None:
    broken = dataclasses.replace(
        make_result(), summary=dataclasses.replace(make_result().summary, cv=math.inf)
    )
    with pytest.raises(InvalidResult, match=r"summary\.cv must be null or a finite number >= 0, not inf"):
        broken.to_json()
    assert "Infinity" not in make_result().to_json() and "NaN" not in make_result().to_json()


def test_a_binary_file_is_refused_as_not_a_result(tmp_path: Path) -> None:
    path = tmp_path / "blob.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InvalidResult, match="not UTF-8 text"):
        Result.load(path)
    with pytest.raises(InvalidResult, match="not UTF-8 text"):
        read_results(path)


def test_tags_must_be_one_short_line() -> None:
    assert tag_problem("nightly") is None and tag_problem("a100 · bf16") is None
    assert "empty" in (tag_problem("") or "") and "empty" in (tag_problem("  ") or "")
    assert "control character or line break" in (tag_problem("a\nb") or "")
    assert "control character or line break" in (tag_problem("a\x1b[31m") or "")
    assert "control character or line break" in (tag_problem("a\u2028b") or "")
    assert "5000 characters" in (tag_problem("t" * 5000) or "")


# --- properties --------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, allow_nan=False, allow_infinity=False) | st.integers(0, 10**15)
counts = st.integers(0, 2**62)
texts = st.text(max_size=20)
tags = st.text(min_size=1, max_size=100).filter(lambda t: tag_problem(t) is None)


def value_of(kind: Kind) -> st.SearchStrategy[Any]:
    """Valid values of a kind, by hand: the test does not ask the validator what is valid."""
    plain = {
        id(NUMBER): finite,
        id(AT_LEAST_0): non_negative,
        id(COUNT): counts,
        id(TEXT): texts,
        id(FLAG): st.booleans(),
    }
    if id(kind) in plain:
        return plain[id(kind)]
    inner = {"null or a finite number": finite, "null or a finite number >= 0": non_negative}
    return st.none() | inner[kind.says]


def fields_of(table: dict[str, Kind]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({name: value_of(kind) for name, kind in table.items()})


json_values = st.recursive(
    st.none() | st.booleans() | finite | st.integers(-(10**12), 10**12) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def section_of(section: type) -> st.SearchStrategy[dict[str, Any]]:
    """Some of a typed section's fields, each holding any JSON value (a record keeps what it holds),
    a field that is itself a section (or a list or dict of them) holding some of that one's."""
    hints = typing.get_type_hints(section)
    fields = {f.name: _field_value(hints[f.name]) for f in dataclasses.fields(section)}
    return st.fixed_dictionaries({}, optional=fields)


def _field_value(kind: Any) -> st.SearchStrategy[Any]:
    args = [k for k in typing.get_args(kind) if k is not type(None)]
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return st.none() | _field_value(args[0])
    if origin is list and dataclasses.is_dataclass(args[0]):
        return st.lists(st.deferred(lambda: section_of(args[0])), max_size=2)
    if origin is dict and dataclasses.is_dataclass(args[1]):
        return st.dictionaries(texts, st.deferred(lambda: section_of(args[1])), max_size=2)
    if dataclasses.is_dataclass(kind):
        return st.deferred(lambda: section_of(kind))
    return json_values


any_sections = st.fixed_dictionaries(
    {
        "config": st.fixed_dictionaries(
            {"problem": texts, "mode": st.sampled_from(["train", "infer"]), "lr": finite},
            optional={"extra": json_values},
        ),
        "problem": st.fixed_dictionaries({"name": texts, "size": st.none() | texts}),
        "batch_size": st.integers(1, 10**9),
        "environment": st.fixed_dictionaries(
            {"device": st.fixed_dictionaries({"name": texts, "type": texts}), "hostname": texts}
        ),
        "intervals": st.lists(fields_of(INTERVAL), max_size=4),
        "losses": st.lists(finite, max_size=5),
        "summary": fields_of(SUMMARY),
        "warnings": st.lists(texts, max_size=3),
        "batch_size_search": st.lists(
            st.fixed_dictionaries({"batch_size": st.integers(1, 4096), "fits": st.booleans()}), max_size=2
        ),
        "flops": st.fixed_dictionaries({"mfu": st.none() | non_negative}),
        "energy": st.fixed_dictionaries({"samples_per_joule": st.none() | non_negative, "reason": texts}),
        "memory": st.fixed_dictionaries({"process_peak_rss_bytes": st.none() | counts}),
        "repeat": st.none(),
        "fidelity": st.none() | st.fixed_dictionaries({"final_loss": finite}),
        "streaming": st.none(),
        "input": st.none(),
        "estimate": st.none() | section_of(Estimate),
        "distributed": st.none(),
        "compile": st.none(),
        "operators": st.none() | section_of(Operators),
        "generation": st.none() | section_of(Generation),
        "serving": st.none() | st.dictionaries(texts, json_values, max_size=3),
        "run_id": st.from_regex(RUN_ID, fullmatch=True).filter(lambda s: ".." not in s),
        "created_at": texts,
        "flowrate_version": texts,
        "schema_version": st.integers(1, SCHEMA_VERSION),
    }
)
KIND_SECTIONS = ("fidelity", "generation", "serving")


def _one_kind(data: dict[str, Any], keep: str | None) -> dict[str, Any]:
    """A record is of one kind: at most one kind's own section (flowrate writes no other)."""
    return {**data, **{name: None for name in KIND_SECTIONS if name != keep}}


records = st.builds(_one_kind, any_sections, st.sampled_from((None, *KIND_SECTIONS)))


def exact(data: Any) -> str:
    """Equality that also tells 1 from 1.0 and -0.0 from 0.0."""
    return json.dumps(data, sort_keys=True)


@settings(max_examples=60, deadline=None)
@given(records, st.lists(tags, max_size=4, unique=True))
def test_valid_records_keep_every_value_and_then_round_trip_exactly_through_a_file_and_the_store(
    data: dict[str, Any], run_tags: list[str]
) -> None:
    read = Result.from_dict(data).to_dict()  # in this version's layout: typed sections in full
    _kept(data, read)
    assert exact(Result.from_dict(read).to_dict()) == exact(read)
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "runs.jsonl"
        export.write_text(json.dumps({**data, "tags": run_tags}) + "\n")
        entries = read_results(export)
        with Store(Path(folder) / "s.db") as store:
            assert store.add_many([(result, own) for result, own in entries]) == [data["run_id"]]
            run = store.get(data["run_id"])
    assert exact(run.result.to_dict()) == exact(read)
    assert run.tags == tuple(sorted(run_tags))


def _kept(written: Any, read: Any, where: str = "") -> None:
    """Every value the record holds reads back exactly (the layout may add fields, also to each
    section in a list, the version rises), 1 still told from 1.0."""
    if isinstance(written, dict):
        for key, value in written.items():
            if where == "" and key == "schema_version":
                assert read[key] == SCHEMA_VERSION
            else:
                _kept(value, read[key], f"{where}{key}.")
    elif isinstance(written, list) and isinstance(read, list) and len(read) == len(written):
        for n, (one, back) in enumerate(zip(written, read, strict=True)):  # a list of sections
            _kept(one, back, f"{where}[{n}].")
    else:
        assert exact(read) == exact(written), where


def _bad_values(kind: Kind) -> list[Any]:
    """Values no field of ``kind`` may hold, chosen by hand (by the kind's description)."""
    always = [math.nan, math.inf, -math.inf, [1], {"a": 1}]
    numbers = ["fast", True, *always]
    return {
        "a finite number": [None, *numbers],
        "a finite number >= 0": [None, -1, -0.5, *numbers],
        "an integer >= 0": [None, -1, 1.5, "3", *numbers],
        "a string of valid Unicode": [None, 3, "\udcff", *always],
        "true or false": [None, 0, "yes", *always],
        "null or a finite number": numbers,
        "null or a finite number >= 0": [-1, -0.5, *numbers],
    }[kind.says]


def _corruptions(base: dict[str, Any]) -> list[Callable[[dict[str, Any]], object]]:
    """Ways to damage ``base``: each a function that changes a copy of it in place."""
    out: list[Callable[[dict[str, Any]], object]] = []
    for name, kind in SUMMARY.items():
        for bad in _bad_values(kind):
            out.append(lambda d, n=name, b=bad: d["summary"].__setitem__(n, b))
        if name not in SUMMARY_LATER:
            out.append(lambda d, n=name: d["summary"].pop(n))
    for name, kind in INTERVAL.items():
        for bad in _bad_values(kind):
            out.append(lambda d, n=name, b=bad: d["intervals"][-1].__setitem__(n, b))
    for bad in (0, -3, 2.5, "8", True, None, math.nan):
        out.append(lambda d, b=bad: d.__setitem__("batch_size", b))
    for bad in ("../../etc/passwd", "/etc/passwd", "a/b", "..", "a..b", "a\\b", " a", "a\nb", "é" * 3, 7):
        out.append(lambda d, b=bad: d.__setitem__("run_id", b))
    for key in ("config", "problem", "environment", "summary", "losses", "batch_size"):
        out.append(lambda d, k=key: d.pop(k))
    for key, bad in [("intervals", {}), ("losses", [math.nan]), ("warnings", [3]), ("config", [])]:
        out.append(lambda d, k=key, b=bad: d.__setitem__(k, b))
    out += [
        lambda d: d["summary"].__setitem__("unknown", 1),
        lambda d: d["intervals"][0].__setitem__("unknown", 1),
        lambda d: d["config"].__setitem__("lr", math.nan),
        lambda d: d["environment"].__setitem__("device", "cpu"),
        lambda d: d["problem"].__setitem__("name", "\udcff"),
        lambda d: d.__setitem__("schema_version", SCHEMA_VERSION + 1),
        lambda d: d.__setitem__("schema_version", None),
    ]
    return out


BASE = record(run_id="feedfeed0001")
CORRUPTIONS = _corruptions(BASE)


def test_every_corruption_of_a_record_is_refused_as_invalid() -> None:
    for change in CORRUPTIONS:
        data = copy.deepcopy(BASE)
        change(data)
        refused(data)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(range(len(CORRUPTIONS))), st.sampled_from(["jsonl", "json"]))
def test_every_corruption_is_refused_and_leaves_the_store_as_it_was(
    run_cli: Callable[..., Any], which: int, fmt: str
) -> None:
    data = copy.deepcopy(BASE)
    CORRUPTIONS[which](data)
    with pytest.raises(InvalidResult):
        Result.from_dict(data)
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "s.db"
        with Store(store) as opened:
            opened.add(make_result(run_id="0123456789ab"), ["kept"])
        before = digest(store)
        file = Path(folder) / f"in.{fmt}"
        good = record(run_id="cafecafe0001")
        text = json.dumps(data) if fmt == "json" else f"{json.dumps(good)}\n{json.dumps(data)}\n"
        file.write_text(text)
        with pytest.raises(InvalidResult):
            read_results(file)
        outcome = run_cli("import", str(file), "--store", str(store))
        assert outcome.code == EXIT_BAD_RECORD
        [line] = outcome.stderr.strip().splitlines()
        assert line.startswith("error: ") and "nothing was imported" in line
        assert digest(store) == before
        with Store(store, readonly=True) as opened:
            assert [r.run_id for r in opened.runs()] == ["0123456789ab"]


def as_object(data: dict[str, Any]) -> Result | None:
    """The record built as a Result object without reading it (None where it cannot be built)."""
    known = {f.name for f in dataclasses.fields(Result)}
    if not isinstance(data.get("intervals"), list) or not isinstance(data.get("summary"), dict):
        return None
    try:
        return Result(
            **{
                **{k: v for k, v in data.items() if k in known},
                "intervals": [IntervalRecord(**i) for i in data["intervals"]],
                "summary": RunSummary(**data["summary"]),
            }
        )
    except TypeError:  # a field missing, unknown, or an interval that is not an object
        return None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(range(len(CORRUPTIONS))))
def test_the_store_refuses_a_damaged_result_object_and_keeps_what_it_held(which: int) -> None:
    """A Result made in Python (not read from JSON) is checked on its way into the store too."""
    data = copy.deepcopy(BASE)
    CORRUPTIONS[which](data)
    damaged = as_object(data)
    if damaged is None:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.db"
        with Store(path) as store:
            store.add(make_result(run_id="0123456789ab"))
            with pytest.raises(InvalidResult):
                store.add_many([(make_result(run_id="0123456789ac"), []), (damaged, [])])
            assert [r.run_id for r in store.runs()] == ["0123456789ab"]


def test_validate_record_takes_the_newest_version_it_reads() -> None:
    data = record()
    validate_record(data, SCHEMA_VERSION)
    with pytest.raises(InvalidResult, match="newer than this flowrate reads"):
        validate_record(data, SCHEMA_VERSION - 1)


def test_a_run_reference_is_a_file_only_when_it_ends_in_json_and_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    make_result().save(tmp_path / "base.json")
    (tmp_path / "abcdef123456").write_text("{}")  # a file that looks like a run id
    assert result_file("base.json") == Path("base.json")
    assert result_file(str(tmp_path / "base.json")) == tmp_path / "base.json"
    assert result_file("abcdef123456") is None  # an id never reads a file
    assert result_file("nightly") is None and result_file("missing.json") is None
    for path in ("../../etc/passwd", "/etc/passwd", "./abcdef123456"):
        with pytest.raises(FlowrateError, match="is no result file"):
            result_file(path)
