"""Records written by each earlier schema version (tests/fixtures/records, each made by that
version's own code) read back with the numbers they hold, through a file and through the store,
brought to this version's layout by the one migration function (flowrate.results.migrate); a
record this version writes leaves an unknown spread unknown instead of 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import flowrate
from flowrate.results.migrate import upgrade
from flowrate.results.schema import SCHEMA_VERSION, Result
from flowrate.results.sections import Kind
from flowrate.results.store import Store

RECORDS = Path(__file__).parent.parent / "fixtures" / "records"
EARLIER = sorted(RECORDS.glob("v*.json"))


def _same_numbers(written: dict[str, Any], read: dict[str, Any], where: str = "") -> None:
    """Every field the record holds reads back as written (later fields are added, none changed);
    only the version rises, and a generation's model shape moves under problem.settings (7)."""
    for key, value in written.items():
        if where == "" and key == "schema_version":
            assert read[key] == SCHEMA_VERSION
            continue
        if where == "problem." and key not in read and key in read.get("settings", {}):
            assert read["settings"][key] == value, f"{where}{key} (under settings)"
            continue
        if isinstance(value, dict) and isinstance(read.get(key), dict):
            _same_numbers(value, read[key], f"{where}{key}.")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            assert len(read[key]) == len(value), f"{where}{key}"
            for n, (one, back) in enumerate(zip(value, read[key], strict=True)):
                _same_numbers(one, back, f"{where}{key}[{n}].")
        else:
            assert read.get(key) == value, f"{where}{key}"


def test_every_earlier_version_has_a_fixture() -> None:
    versions = {json.loads(p.read_text())["schema_version"] for p in EARLIER}
    assert versions == set(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("path", EARLIER, ids=lambda p: p.stem)
def test_an_earlier_record_reads_back_with_its_numbers_from_a_file_and_the_store(
    path: Path, tmp_path: Path
) -> None:
    written = json.loads(path.read_text())
    result = Result.load(path)
    _same_numbers(written, result.to_dict())
    with Store(tmp_path / "s.db") as store:
        store.add(result)
        stored = store.get(result.run_id).result
    _same_numbers(written, stored.to_dict())
    assert stored.summary.samples_per_sec == written["summary"]["samples_per_sec"]


KINDS = {"check": Kind.CHECK, "generate": Kind.GENERATE, "serve": Kind.SERVE}


@pytest.mark.parametrize("path", EARLIER, ids=lambda p: p.stem)
def test_an_earlier_record_takes_its_kind_from_its_sections_and_round_trips(path: Path) -> None:
    written = json.loads(path.read_text())
    result = Result.load(path)
    assert result.kind is KINDS.get(path.stem.split("-", 1)[1], Kind.RUN)
    again = Result.from_json(result.to_json())
    assert again == result and again.to_dict() == result.to_dict()
    assert json.loads(path.read_text()) == written  # upgrade copies: the record read is not changed


def test_a_generation_keeps_its_model_shape_under_settings() -> None:
    written = json.loads((RECORDS / "v6-generate.json").read_text())
    upgraded = upgrade(written, SCHEMA_VERSION)
    assert upgraded["problem"]["settings"]["layers"] == written["problem"]["layers"]
    assert "layers" not in upgraded["problem"] and "layers" in written["problem"]
    assert Result.from_dict(written).problem.settings["layers"] == written["problem"]["layers"]


def test_a_single_interval_has_an_unknown_spread_not_zero() -> None:
    result = flowrate.benchmark("fc_mnist", size="debug", steps=1, preheat_steps=1, sample_every=1)
    assert result.summary.intervals == 1
    assert result.summary.cv is None and result.summary.stdev_samples_per_sec is None
    assert Result.from_json(result.to_json()).summary.cv is None
    assert result.schema_version == SCHEMA_VERSION
