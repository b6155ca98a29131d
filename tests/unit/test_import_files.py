"""flowrate.results.transfer.import_files: every file read before any is written, each file's
runs added with its own tags and the import's, and what each file added or found there."""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import make_result
from flowrate.results.store import Store
from flowrate.results.transfer import Imported, import_files
from flowrate.results.validate import InvalidResult


def test_each_file_is_heard_with_what_it_added_and_what_was_there(tmp_path: Path) -> None:
    store = tmp_path / "flowrate.db"
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    make_result(run_id="dddd00000001").save(one)
    make_result(run_id="dddd00000002").save(two)
    heard: list[Imported] = []
    done = import_files([str(one), str(two), str(one)], str(store), ["t"], on_file=heard.append)
    assert done == heard
    assert [(d.file, d.added, d.kept, d.store) for d in done] == [
        (str(one), 1, 0, store),
        (str(two), 1, 0, store),
    ]  # a file named twice is read once
    again = import_files([str(one)], str(store))
    assert [(d.added, d.kept) for d in again] == [(0, 1)]
    with Store(store, create=False) as opened:
        assert {r.run_id: r.tags for r in opened.runs()} == {"dddd00000001": ("t",), "dddd00000002": ("t",)}


def test_an_unreadable_file_imports_nothing_from_any_file(tmp_path: Path) -> None:
    store = tmp_path / "flowrate.db"
    good, broken = tmp_path / "good.json", tmp_path / "broken.jsonl"
    make_result(run_id="dddd00000003").save(good)
    broken.write_text("{not json\n")
    with pytest.raises(InvalidResult, match=r"broken\.jsonl line 1 is not JSON"):
        import_files([str(good), str(broken)], str(store))
    assert not store.exists()
