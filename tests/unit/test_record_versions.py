"""Records written by each earlier schema version (tests/fixtures/records, each made by that
version's own code) read back with the numbers they hold, through a file and through the store;
a record this version writes leaves an unknown spread unknown instead of 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import flowrate
from flowrate.results.schema import SCHEMA_VERSION, Result
from flowrate.results.store import Store

RECORDS = Path(__file__).parent.parent / "fixtures" / "records"
EARLIER = sorted(RECORDS.glob("v*.json"))


def _same_numbers(written: dict[str, Any], read: dict[str, Any], where: str = "") -> None:
    """Every field the record holds reads back as written (later fields are added, none changed)."""
    for key, value in written.items():
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


def test_a_single_interval_has_an_unknown_spread_not_zero() -> None:
    result = flowrate.benchmark("fc_mnist", size="debug", steps=1, preheat_steps=1, sample_every=1)
    assert result.summary.intervals == 1
    assert result.summary.cv is None and result.summary.stdev_samples_per_sec is None
    assert Result.from_json(result.to_json()).summary.cv is None
    assert result.schema_version == SCHEMA_VERSION
