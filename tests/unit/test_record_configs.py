"""A record's configuration is typed by its kind (flowrate.results.configs): a run's and a check's
read as RunConfig, a generation's as GenerateConfig, a load test's and a survey's as their own;
each writes back the JSON it was read from, keys this flowrate does not name included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from factories import make_result
from flowrate.config import GenerateConfig, Mode, Precision, RunConfig
from flowrate.results.configs import ServeRecordConfig, SurveyRecordConfig, config_from
from flowrate.results.schema import Result
from flowrate.results.sections import Kind
from flowrate.results.store_schema import columns

RECORDS = Path(__file__).parent.parent / "fixtures" / "records"


def _survey() -> dict[str, Any]:
    base = make_result(1.0).to_dict()
    config = {
        "problem": "survey",
        "mode": "survey",
        "device": "cpu",
        "quick": True,
        "seconds": 0.5,
        "threads": 2,
    }
    survey = {**base, "kind": "survey", "config": config, "survey": {"device": "cpu", "quick": True}}
    return Result.from_dict(survey).to_dict()  # with every field of the survey section


def _records() -> dict[Kind, dict[str, Any]]:
    """A record of each kind as this version writes it."""
    generate, serve = (Result.load(RECORDS / f"v6-{name}.json").to_dict() for name in ("generate", "serve"))
    return {
        Kind.RUN: make_result(10.0).to_dict(),
        Kind.CHECK: make_result(10.0, final_loss=0.5).to_dict(),
        Kind.GENERATE: generate,
        Kind.SERVE: serve,
        Kind.SURVEY: _survey(),
    }


TYPES = {
    Kind.RUN: RunConfig,
    Kind.CHECK: RunConfig,
    Kind.GENERATE: GenerateConfig,
    Kind.SERVE: ServeRecordConfig,
    Kind.SURVEY: SurveyRecordConfig,
}


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_record_of_each_kind_reads_its_config_typed_and_writes_the_same_json(kind: Kind) -> None:
    record = _records()[kind]
    text = json.dumps(record, indent=2, allow_nan=False)
    result = Result.from_json(text)
    assert result.kind is kind and type(result.config) is TYPES[kind]
    assert result.to_json() == text


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_config_key_this_flowrate_does_not_name_survives_in_its_place(kind: Kind) -> None:
    record = _records()[kind]
    first, *rest = record["config"].items()
    config = dict([first, ("from_a_newer_flowrate", {"x": [1, 2.5]}), *rest])
    text = json.dumps({**record, "config": config}, indent=2)
    result = Result.from_json(text)
    assert result.config.extra["from_a_newer_flowrate"] == {"x": [1, 2.5]}
    assert result.to_json() == text


def test_the_shared_settings_read_alike_for_every_kind() -> None:
    read = {kind: Result.from_dict(record) for kind, record in _records().items()}
    assert [(r.config.mode, r.config.execution) for r in read.values()] == [
        (Mode.TRAIN, "resident"),
        (Mode.TRAIN, "resident"),
        ("generate", "resident"),
        ("serve", "remote"),
        ("survey", None),
    ]
    assert [columns(r)["precision"] for r in read.values()] == ["fp32", "fp32", "fp32", None, None]
    assert read[Kind.SURVEY].config == SurveyRecordConfig(device="cpu", quick=True, seconds=0.5, threads=2)


def test_a_value_this_flowrate_does_not_know_is_kept_as_written_and_reads_as_the_default() -> None:
    record = make_result(10.0).to_dict()
    text = json.dumps({**record, "config": {**record["config"], "precision": "fp4"}}, indent=2)
    result = Result.from_json(text)
    assert isinstance(result.config, RunConfig) and result.config.precision is Precision.FP32
    assert result.config.extra == {"precision": "fp4"}
    assert result.to_json() == text


def test_a_config_read_from_a_record_is_what_ran_not_checked_again() -> None:
    # --checkpoint-every without --checkpoint-dir is refused on the command line; a record holding
    # it (hand-edited, or from a flowrate that allowed it) still reads back
    config = config_from(Kind.RUN, {"problem": "fc_mnist", "checkpoint_every": 5})
    assert isinstance(config, RunConfig) and config.checkpoint_every == 5 and config.checkpoint_dir is None
