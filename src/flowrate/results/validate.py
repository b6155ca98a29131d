"""One check of a result record, made wherever one is read: a file, an import, a row of the store.

A record is refused, with one line naming the field and the value, when a reader would trip on it:
a field missing or of the wrong type (``"samples_per_sec": "fast"``), a number that is NaN or
infinite (anywhere in the record: flowrate writes strict JSON), a negative count or rate, a
batch size below 1, intervals that are not a list of interval objects, text that is not valid
Unicode, or a run id that could be taken for a path. Fields a reader never looks into (the
configuration's other options, the environment's details, the sections' contents) are free-form
JSON, finite numbers only.

Run ids: flowrate writes 12 lowercase hex digits (``uuid4().hex[:12]``). A record may carry any
short word of letters, digits, ``.``, ``_`` and ``-`` (tests and other tools name runs so), never
a path: no separator, no ``..``. An empty id is a result not (yet) recorded; the store refuses it.

This module knows the record's layout by name (the tables below) and imports nothing from
schema.py, which calls it; tests check that the tables match the dataclasses field for field.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from flowrate.errors import ConfigError, FlowrateError
from flowrate.results.sections import Kind as RecordKind

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_TAG_CHARS = 100


class InvalidResult(FlowrateError):
    """A result record flowrate cannot read: the message names the field and the value."""


@dataclass(frozen=True)
class Kind:
    """What a field holds: a test and the words for it in a message."""

    test: Callable[[object], bool]
    says: str


def _number(value: object) -> bool:
    if type(value) is float:  # exact types first: this runs for every number of every run read
        return math.isfinite(value)
    if type(value) is int:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _at_least_0(value: object) -> bool:
    return _number(value) and value >= 0  # type: ignore[operator]  # _number: an int or a float


def _integer(value: object, low: int) -> bool:
    if type(value) is int:
        return value >= low
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")  # a lone surrogate (JSON's "\\udcff") cannot be stored or printed
    except UnicodeEncodeError:
        return False
    return True


def _optional(kind: Kind) -> Kind:
    return Kind(lambda v: v is None or kind.test(v), f"null or {kind.says}")


NUMBER = Kind(_number, "a finite number")
AT_LEAST_0 = Kind(_at_least_0, "a finite number >= 0")
COUNT = Kind(lambda v: _integer(v, 0), "an integer >= 0")
POSITIVE = Kind(lambda v: _integer(v, 1), "an integer >= 1")
TEXT = Kind(lambda v: isinstance(v, str) and _unicode(v), "a string of valid Unicode")
FLAG = Kind(lambda v: isinstance(v, bool), "true or false")
OBJECT = Kind(lambda v: isinstance(v, dict), "an object")
LIST = Kind(lambda v: isinstance(v, list), "a list")

RATE = AT_LEAST_0
MAYBE_RATE = _optional(AT_LEAST_0)

# The summary (RunSummary), field by field. SUMMARY_LATER's fields came after version 1 and may be
# absent; every other field must be there.
SUMMARY_LATER = {
    "compute_samples_per_sec": MAYBE_RATE,
    "checkpoints": COUNT,
    "checkpoint_s": AT_LEAST_0,
    "checkpoint_overhead": AT_LEAST_0,
}
SUMMARY = {
    **dict.fromkeys(["samples_per_sec", "rate_samples_per_sec", "steps_per_sec"], RATE),
    "tokens_per_sec": MAYBE_RATE,
    "model_flops_per_sec": RATE,
    **dict.fromkeys(["median_samples_per_sec", "mean_samples_per_sec"], RATE),
    # None: the spread of one interval is unknown (version 6; earlier records are upgraded)
    "stdev_samples_per_sec": MAYBE_RATE,
    "cv": _optional(AT_LEAST_0),
    **dict.fromkeys(["min_samples_per_sec", "max_samples_per_sec"], RATE),
    **dict.fromkeys(["p5_samples_per_sec", "p95_samples_per_sec"], MAYBE_RATE),
    # the mean minus (plus) the half-width: may be below 0 for a noisy run
    **dict.fromkeys(["ci95_low_samples_per_sec", "ci95_high_samples_per_sec"], _optional(NUMBER)),
    **dict.fromkeys(["timed_steps", "timed_samples"], COUNT),
    "timed_duration_s": AT_LEAST_0,
    **dict.fromkeys(["intervals", "sample_every_steps", "preheat_steps"], COUNT),
    "preheat_s": AT_LEAST_0,
    "final_loss": _optional(NUMBER),
    **SUMMARY_LATER,
}

# One interval (IntervalRecord). INTERVAL_LATER's fields have defaults and may be absent.
INTERVAL_LATER = {
    "after_checkpoint": FLAG,
    "loss": _optional(NUMBER),
    **dict.fromkeys(["model_flops_per_sec", "mfu", "power_w"], MAYBE_RATE),
    **dict.fromkeys(["device_memory_allocated_bytes", "process_rss_bytes"], MAYBE_RATE),
    **dict.fromkeys(["input_wait_s", "input_bound_share"], MAYBE_RATE),
}
INTERVAL = {
    "index": COUNT,
    "kind": TEXT,
    **dict.fromkeys(["first_step", "steps", "samples"], COUNT),
    **dict.fromkeys(["seconds", "samples_per_sec", "rate_samples_per_sec", "global_samples_per_sec"], RATE),
    "elapsed_s": AT_LEAST_0,
    **INTERVAL_LATER,
}

# The record's own fields (Result). Unknown top-level keys are ignored: an export line carries its
# tags beside them.
TOP_REQUIRED = {
    "config": OBJECT,
    "problem": OBJECT,
    "batch_size": POSITIVE,
    "environment": OBJECT,
    "losses": LIST,
    "summary": OBJECT,
}
SECTIONS = [
    *["repeat", "fidelity", "streaming", "input", "estimate", "distributed", "compile", "operators"],
    "generation",  # `flowrate generate` (optional: records without it read with it empty)
    "serving",  # `flowrate serve-bench` (version 5)
    "survey",  # `flowrate survey` (optional: records without it read with it empty)
    "profile",  # --profile DIR (optional: records without it read with it empty)
    "cost",  # --price-per-hour / --energy-price (optional, likewise)
    "solution",  # --to-solution (optional, likewise)
]
TOP_OPTIONAL = {
    **dict.fromkeys(["intervals", "warnings", "batch_size_search"], LIST),
    **dict.fromkeys(["flops", "energy", "memory"], OBJECT),
    **dict.fromkeys(SECTIONS, _optional(OBJECT)),
    **dict.fromkeys(["run_id", "created_at", "flowrate_version"], TEXT),
    "kind": Kind(lambda v: v in {k.value for k in RecordKind}, " or ".join(map(repr, map(str, RecordKind)))),
}

# The section each kind alone writes: a record of that kind has it and no other kind's
OWN_SECTION = {
    RecordKind.CHECK: "fidelity",
    RecordKind.GENERATE: "generation",
    RecordKind.SERVE: "serving",
    RecordKind.SURVEY: "survey",
}

# Inside the free-form sections: the values that listing, filtering, plots and reports read.
CONFIG_TEXT = ["problem", "size", "mode", "precision", "execution", "device", "optimizer"]
NESTED = {
    **dict.fromkeys([("problem", "name"), ("problem", "size")], _optional(TEXT)),
    **dict.fromkeys([("config", name) for name in CONFIG_TEXT], _optional(TEXT)),
    **dict.fromkeys([("environment", "device"), ("environment", "torch")], _optional(OBJECT)),
    ("environment", "command_line"): _optional(LIST),
    ("flops", "mfu"): MAYBE_RATE,
    ("flops", "mixed_mfu"): MAYBE_RATE,
    **dict.fromkeys([("energy", "samples_per_joule"), ("energy", "average_watts")], MAYBE_RATE),
    ("memory", "device_peak_reserved_bytes"): MAYBE_RATE,
    ("memory", "process_peak_rss_bytes"): MAYBE_RATE,
    ("fidelity", "final_loss"): _optional(NUMBER),
}
# environment.device: measure.env's device_info, a GPU's properties and NVML readings included
DEVICE = {
    **dict.fromkeys(["name", "type", "compute_capability", "driver_version"], _optional(TEXT)),
    **dict.fromkeys(["index", "memory_bytes", "multiprocessor_count"], _optional(COUNT)),
    **dict.fromkeys(["sm_clock_mhz", "max_sm_clock_mhz", "memory_clock_mhz", "power_limit_w"], MAYBE_RATE),
    "nvml": _optional(OBJECT),
}
# `flowrate survey`'s section (Survey) and each of its figures (SurveyFigure), every field optional
SURVEY = {
    "device": _optional(TEXT),
    "quick": FLAG,
    "seconds_per_measurement": _optional(AT_LEAST_0),
    "figures": LIST,
}
SURVEY_FIGURE = {
    **dict.fromkeys(["name", "unit"], TEXT),
    **dict.fromkeys(["value", "datasheet", "fraction"], _optional(AT_LEAST_0)),
    **dict.fromkeys(["band_low", "band_high"], _optional(NUMBER)),
    "within_band": _optional(FLAG),
    "cv": _optional(AT_LEAST_0),
    **dict.fromkeys(["reason", "detail"], _optional(TEXT)),
}
_TYPED = ("summary", "intervals", "losses")  # checked field by field; _check_values walks the rest
_ATTEMPT = {"batch_size": POSITIVE, "fits": FLAG}  # one try of --batch-size auto
_SUMMARY_REQUIRED = SUMMARY.keys() - SUMMARY_LATER.keys()
_INTERVAL_REQUIRED = INTERVAL.keys() - INTERVAL_LATER.keys()


def validate_record(data: Mapping[str, Any], newest_version: int) -> None:
    """Raise InvalidResult naming the first field a reader would trip on; return when all is well."""
    _check_version(data.get("schema_version"), newest_version)
    _check_values(data)
    for name, kind in TOP_REQUIRED.items():
        if name not in data:
            raise InvalidResult(f"not a flowrate result: it has no {name!r} field")
        _expect(name, data[name], kind)
    for name, kind in TOP_OPTIONAL.items():
        if name in data:
            _expect(name, data[name], kind)
    _check_fields("summary", data["summary"], SUMMARY, _SUMMARY_REQUIRED)
    for n, interval in enumerate(data.get("intervals", [])):
        _expect(f"intervals[{n}]", interval, OBJECT)
        _check_fields(f"intervals[{n}]", interval, INTERVAL, _INTERVAL_REQUIRED)
    for n, loss in enumerate(data["losses"]):
        _expect(f"losses[{n}]", loss, NUMBER)
    for n, warning in enumerate(data.get("warnings", [])):
        _expect(f"warnings[{n}]", warning, TEXT)
    for n, attempt in enumerate(data.get("batch_size_search", [])):
        _expect(f"batch_size_search[{n}]", attempt, OBJECT)
        _check_fields(f"batch_size_search[{n}]", attempt, _ATTEMPT, _ATTEMPT.keys())
    if isinstance(survey := data.get("survey"), dict):
        _check_survey(survey)
    for (section, name), kind in NESTED.items():
        inside = data.get(section)
        if isinstance(inside, dict) and name in inside:
            _expect(f"{section}.{name}", inside[name], kind)
    if "kind" in data:
        _check_kind_sections(RecordKind(data["kind"]), data)
    device = data["environment"].get("device")
    if isinstance(device, dict):
        _check_fields("environment.device", device, DEVICE, frozenset())
    check_run_id(data.get("run_id", ""))


def _check_kind_sections(kind: RecordKind, data: Mapping[str, Any]) -> None:
    """A record is of one kind: it holds that kind's own section, and no other kind's."""
    own = OWN_SECTION.get(kind)
    if own is not None and data.get(own) is None:
        raise InvalidResult(f"a {kind} record must have its {own!r} section, and this one has none")
    for other, section in OWN_SECTION.items():
        if other != kind and data.get(section) is not None:
            raise InvalidResult(f"a {kind} record must not hold a {other} record's {section!r} section")


def _check_survey(survey: dict[str, Any]) -> None:
    _check_fields("survey", survey, SURVEY, frozenset())
    for n, figure in enumerate(survey.get("figures", [])):
        _expect(f"survey.figures[{n}]", figure, OBJECT)
        _check_fields(f"survey.figures[{n}]", figure, SURVEY_FIGURE, frozenset())


def check_run_id(run_id: object) -> None:
    """A run id is empty (not recorded yet) or a short word that can never name a path."""
    if run_id == "":
        return
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise InvalidResult(
            f"run_id must be letters, digits, '.', '_' or '-' (flowrate writes 12 hex digits), "
            f"at most 64 and never a path, not {shown(run_id)}"
        )


def check_tags(tags: Sequence[str]) -> None:
    """Refuse a tag that would not read as one short line: ConfigError on the --tag option."""
    for tag in tags:
        problem = tag_problem(tag)
        if problem:
            raise ConfigError("tag", problem)


def tag_problem(tag: object) -> str | None:
    """Why ``tag`` cannot be a tag (one line), or None when it can."""
    if not isinstance(tag, str):
        return f"a tag is a string, not {shown(tag)}"
    if not tag.strip():
        return f"a tag must not be empty or only spaces, not {shown(tag)}"
    if len(tag) > MAX_TAG_CHARS:
        return f"tag {shown(tag)} is {len(tag)} characters; a tag has at most {MAX_TAG_CHARS}"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs") for c in tag):
        return f"tag {shown(tag)} holds a control character or line break; a tag is one line of text"
    return None


def shown(value: object, width: int = 40) -> str:
    """A value as a message shows it: its repr on one line, cut to ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _check_version(version: object, newest: int) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidResult("not a flowrate result: it has no integer schema_version")
    if version > newest:
        raise InvalidResult(
            f"this result has schema_version {version}, newer than this flowrate reads "
            f"({newest}); upgrade flowrate to read it"
        )


def _check_fields(
    where: str, values: dict[str, Any], kinds: Mapping[str, Kind], required: AbstractSet[str]
) -> None:
    """Each field known and of its kind, the required ones present. (Run for every interval of
    every run read: set operations first, then one test per field.)"""
    if not required <= values.keys():
        missing = next(name for name in kinds if name in required and name not in values)
        raise InvalidResult(f"{where} has no {missing!r} field")
    if not values.keys() <= kinds.keys():
        unknown = next(name for name in values if name not in kinds)
        raise InvalidResult(f"{where} has an unknown field {shown(unknown)}")
    for name, value in values.items():
        kind = kinds[name]
        if not kind.test(value):
            raise InvalidResult(f"{where}.{name} must be {kind.says}, not {shown(value)}")


def _expect(where: str, value: object, kind: Kind) -> None:
    if not kind.test(value):
        raise InvalidResult(f"{where} must be {kind.says}, not {shown(value)}")


def _check_values(data: Mapping[str, Any]) -> None:
    """Every number finite and every string valid Unicode, in the parts no table types.

    The summary, the intervals and the losses (most of a record) are typed field by field, and
    their kinds test finiteness and Unicode themselves. The rest is walked without recursion, so a
    deeply nested record is refused like any other.
    """
    stack: list[tuple[str, object]] = [(k, v) for k, v in data.items() if k not in _TYPED]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidResult(f"{where} must be a finite number, not {shown(value)}")
        if isinstance(value, str):
            _check_text(where, value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    _check_text(f"{where} key", key)
                stack.append((f"{where}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{n}]", item) for n, item in enumerate(value))


def _check_text(where: str, text: str) -> None:
    if not _unicode(text):
        raise InvalidResult(f"{where} holds text that is not valid Unicode: {shown(text)}")
