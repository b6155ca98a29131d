"""Datasets: a missing or damaged index.json, shards that escape their folder, missing,
truncated or damaged shards. The message names the file (and the record); nothing outside the
dataset's folder is ever read."""

from __future__ import annotations

from hostile.case import FAILED, RUN, TINY, USAGE, Case
from hostile.setups import dataset, flip_byte, index_bytes, index_edit, shard_named, truncate_shard

_RUN = (*RUN, *TINY, "--loader-workers", "0", "--data", "{data}")


def _both(
    name: str,
    change,
    fragment: str,
    code: int = USAGE,
    xfail: str | None = None,
    info_xfail: str | None = None,
) -> list[Case]:  # type: ignore[no-untyped-def]
    """The same damage met by `run --data` and by `data info --verify`."""
    return [
        Case(
            f"dataset-{name}-run",
            _RUN,
            code,
            (fragment,),
            setup=dataset(change),
            watch={"data": "same"},
            xfail=xfail,
        ),
        Case(
            f"dataset-{name}-info",
            ("data", "info", "--verify", "{data}"),
            code,
            (fragment,),
            setup=dataset(change),
            watch={"data": "same"},
            xfail=info_xfail if info_xfail is not None else xfail,
        ),
    ]


def _remove_index(folder):  # type: ignore[no-untyped-def]
    (folder / "index.json").unlink()


def _remove_shard(folder):  # type: ignore[no-untyped-def]
    (folder / "shard-00001.bin").unlink()


CASES = [
    *_both("no-index", _remove_index, "index.json"),
    *_both("index-not-json", index_bytes(b"{fields: ["), "index.json"),
    *_both("index-binary", index_bytes(bytes(range(256))), "index.json"),
    *_both("index-empty", index_bytes(b""), "index.json"),
    *_both("index-a-list", index_bytes(b"[]"), "index.json"),
    *_both("index-other-format", index_edit(lambda i: i.update(format="webdataset")), "index.json"),
    *_both("index-newer", index_edit(lambda i: i.update(version=99)), "index.json"),
    *_both(
        "index-records-string",
        index_edit(lambda i: i["shards"][0].update(records="many")),
        "index.json",
    ),
    *_both(
        "index-records-negative",
        index_edit(lambda i: i["shards"][0].update(records=-5)),
        "index.json",
    ),
    # issue 3: a shard named outside the dataset's folder is refused, not followed
    *_both("shard-escapes", index_edit(shard_named("../../../../../../../../etc/passwd")), "shard"),
    *_both("shard-absolute", index_edit(shard_named("/etc/passwd")), "shard"),
    *_both("shard-missing", _remove_shard, "shard-00001.bin"),
    *_both("shard-truncated", truncate_shard, "shard-00001.bin"),
    # a damaged record: found while reading; the run fails naming file and record
    *_both("shard-damaged", flip_byte, "shard-00000.bin", code=FAILED),
    Case(
        "dataset-for-another-problem",
        ("run", "-p", "transformer", "--size", "debug", *TINY, "--loader-workers", "0", "--data", "{data}"),
        USAGE,
        ("--data",),
        setup=dataset(),
        watch={"data": "same"},
    ),
]
