"""`flowrate data`, `flowrate run --data` and `flowrate analyze-input` end to end on tiny sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from flowrate.data.records import shard_layout
from flowrate.problems.registry import get_problem

FAST = ("--preheat", "1", "--steps", "6", "--sample-every", "2")


@pytest.fixture(scope="module")
def mnist_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from flowrate.data.make import make_dataset

    folder = tmp_path_factory.mktemp("mnist") / "d"
    make_dataset(get_problem("fc_mnist", "debug"), folder, 96, 4)
    return folder


def test_make_then_run_records_the_input_bound_share(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "data",
        "make",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--samples",
        "64",
        "--shards",
        "4",
        "-o",
        str(tmp_path / "d"),
    )
    assert out.code == 0, out.stderr
    assert "wrote 64 samples of fc_mnist/debug (images (784,) uint8, labels () int64 < 10)" in out.stderr
    out = run_cli(
        "run", "-p", "fc_mnist", "--size", "debug", "--data", str(tmp_path / "d"), "-b", "8", *FAST, "--json"
    )
    assert out.code == 0, out.stderr
    result = out.json()
    assert result["config"]["data_dir"] == str(tmp_path / "d")
    section = result["input"]
    assert section["dataset"] == str((tmp_path / "d").resolve())
    assert (section["samples"], section["shards"], section["workers"], section["prefetch"]) == (64, 4, 2, 2)
    assert section["pinned"] is False and section["origin"] == "synthetic"
    intervals = result["intervals"]
    assert len(intervals) == 3
    for interval in intervals:
        assert 0 <= interval["input_wait_s"] <= interval["seconds"]  # waits are part of the interval
        assert interval["input_bound_share"] == pytest.approx(interval["input_wait_s"] / interval["seconds"])
    total = sum(i["input_wait_s"] for i in intervals) / sum(i["seconds"] for i in intervals)
    assert section["input_bound_share"] == pytest.approx(total)
    assert section["input_bound"] in ("no", "moderately", "highly")
    assert "input " in out.stderr and "of step time waiting for data" in out.stderr
    input_warnings = [w for w in result["warnings"] if "input-bound" in w]
    assert bool(input_warnings) == (section["input_bound"] != "no")


def test_transformer_run_from_an_imported_token_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (np.arange(4000) % 512).astype(np.uint16).tofile(tmp_path / "train.bin")
    out = run_cli(
        "data",
        "import-tokens",
        str(tmp_path / "train.bin"),
        "-p",
        "transformer",
        "--size",
        "debug",
        "--shards",
        "2",
        "-o",
        str(tmp_path / "d"),
    )
    assert out.code == 0, out.stderr
    assert "wrote 121 samples of transformer/debug (tokens (33,) uint16 < 512)" in out.stderr
    out = run_cli(
        "run",
        "-p",
        "transformer",
        "--size",
        "debug",
        "--data",
        str(tmp_path / "d"),
        "--loader-workers",
        "0",
        *FAST,
        "--json",
    )
    assert out.code == 0, out.stderr
    result = out.json()
    assert result["input"]["workers"] == 0 and result["input"]["prefetch"] is None
    assert all(i["input_bound_share"] is not None for i in result["intervals"])
    out = run_cli("data", "info", str(tmp_path / "d"), "--verify")
    assert out.code == 0, out.stderr
    assert "all 121 records pass their crc32 check" in out.stderr


def test_import_images_then_info(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name in ("ant", "bee"):
        (tmp_path / "img" / name).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (40, 36), (i * 40, 90, 200)).save(tmp_path / "img" / name / f"{i}.png")
    out = run_cli(
        "data",
        "import-images",
        str(tmp_path / "img"),
        "-p",
        "resnet50",
        "--size",
        "debug",
        "--shards",
        "2",
        "-o",
        str(tmp_path / "d"),
    )
    assert out.code == 0, out.stderr
    out = run_cli("data", "info", str(tmp_path / "d"))
    assert out.code == 0, out.stderr
    assert "classes" in out.stdout and "2: ant, bee" in out.stdout  # inspection output
    assert "images (3, 32, 32) uint8, labels () int64 < 10" in out.stdout


def test_a_corrupt_shard_stops_the_run_naming_file_and_record(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from flowrate.data.make import make_dataset

    make_dataset(get_problem("fc_mnist", "debug"), tmp_path / "d", 32, 2)
    shard = tmp_path / "d" / "shard-00001.bin"
    data = bytearray(shard.read_bytes())
    data[5 * 784 + 100] ^= 0xFF  # a pixel of record 5
    shard.write_bytes(bytes(data))
    out = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--data", str(tmp_path / "d"), "-b", "8", *FAST)
    assert out.code == 1
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("error:") and "Traceback" not in out.stderr
    assert f"shard {shard} is corrupt: record 5 (sample 21 of the dataset)" in " ".join(lines[-3:])
    out = run_cli("data", "info", str(tmp_path / "d"), "--verify")
    assert out.code == 1 and "record 5" in out.stderr


def test_bad_datasets_and_settings_are_refused_before_running(
    run_cli, mnist_data: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (
            ("-p", "transformer", "--size", "debug", "--data", str(mnist_data)),
            [
                "--data:",
                "holds samples of images (784,) uint8",
                "transformer/debug takes tokens (33,) uint16",
            ],
        ),
        (
            ("-p", "fc_mnist", "--size", "debug", "--data", str(mnist_data), "--loader-workers", "5"),
            [
                "--loader-workers:",
                "has 4 shard(s), but 5 loader worker(s) need at least 5",
                "--loader-workers 4",
            ],
        ),
        (("-p", "gemm", "--size", "debug", "--data", str(mnist_data)), ["--data:", "gemm is a kernel"]),
        (
            ("-p", "fc_mnist", "--size", "debug", "--loader-workers", "3"),
            ["--loader-workers:", "applies with --data DIR only"],
        ),
        (
            ("-p", "fc_mnist", "--size", "debug", "--data", str(tmp_path / "none")),
            ["no dataset at", "does not exist"],
        ),
    ]
    for args, expected in cases:
        out = run_cli("run", *args, *FAST)
        assert out.code in (1, 2), (args, out.stderr)
        text = " ".join(out.stderr.split())
        for part in expected:
            assert part in text, (args, out.stderr)
        assert "Traceback" not in out.stderr
    out = run_cli("check", "-p", "fc_mnist", "--size", "debug", "--data", str(mnist_data), "--steps", "3")
    assert out.code == 2 and "a check trains on its problem's learnable task" in out.stderr
    out = run_cli(
        "data",
        "make",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--samples",
        "3",
        "--shards",
        "4",
        "-o",
        str(tmp_path / "x"),
    )
    assert out.code == 2 and "--shards: 4 shards of 3 samples would leave some empty" in out.stderr


def test_a_dataset_with_a_broken_shard_layout_is_named(run_cli, mnist_data: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    copy = tmp_path / "d"
    shutil.copytree(mnist_data, copy)
    (copy / "shard-00002.bin").unlink()
    out = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--data", str(copy), *FAST)
    assert out.code == 2 and "shard-00002.bin is missing" in out.stderr
    _, _, size = shard_layout(get_problem("fc_mnist", "debug").sample_spec(), 24)
    (copy / "shard-00002.bin").write_bytes(b"\0" * (size - 1))
    out = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--data", str(copy), *FAST)
    assert out.code == 2 and f"is {size - 1} bytes, but 24 records take {size}" in " ".join(
        out.stderr.split()
    )


def test_analyze_input_recommends_the_known_answer(run_cli, mnist_data: Path) -> None:  # type: ignore[no-untyped-def]
    """4 ms per sample: 0 or 1 worker deliver ≈ 250 samples/s, 2 workers ≈ 500; the model takes 300."""
    args = ("analyze-input", "-p", "fc_mnist", "--size", "debug", "--data", str(mnist_data), "-b", "4")
    options = (
        "--consumption-rate",
        "300",
        "--sample-cost",
        "0.004",
        "--max-workers",
        "2",
        "--prefetch-depths",
        "2",
        "--seconds",
        "0.25",
    )
    out = run_cli(*args, *options)
    assert out.code == 0, out.stderr
    assert "recommended: --loader-workers 2 --prefetch 2" in " ".join(out.stderr.split())
    assert "recommended" in out.stdout
    out = run_cli(*args, *options[:1], "2000", *options[2:], "--json")
    assert out.code == 0, out.stderr
    analysis = out.json()
    assert analysis["recommended"] is None
    assert [(p["workers"], p["prefetch"]) for p in analysis["points"]] == [(0, None), (1, 2), (2, 2)]
    # C / P of the fastest pipeline. Two workers sleeping 4 ms a sample deliver at most 500 samples/s:
    # 4 at least, less a prefetched batch's head start; load only raises it (benchmarks/input_analyzer.py)
    shortfall = 2000 / max(p["samples_per_sec"] for p in analysis["points"])
    assert analysis["shortfall"] == shortfall > 3.2
    assert "no configuration here keeps the input-bound share under 5%" in " ".join(out.stderr.split())


def test_analyze_input_measures_the_model_and_refuses_loader_flags(run_cli, mnist_data: Path) -> None:  # type: ignore[no-untyped-def]
    base = ("analyze-input", "-p", "fc_mnist", "--size", "debug", "--data", str(mnist_data), "-b", "8")
    out = run_cli(
        *base,
        "--steps",
        "5",
        "--preheat",
        "1",
        "--max-workers",
        "1",
        "--prefetch-depths",
        "2",
        "--seconds",
        "0.1",
        "--json",
    )
    assert out.code == 0, out.stderr
    analysis = out.json()
    assert analysis["consumption_source"].startswith("measured: 5 synthetic steps of fc_mnist/debug")
    assert analysis["consumption_samples_per_sec"] > 0
    assert json.dumps(analysis)  # plain JSON
    out = run_cli(*base, "--loader-workers", "1")
    assert out.code == 2 and "analyze-input tries loader configurations itself" in out.stderr
    out = run_cli("analyze-input", "-p", "fc_mnist", "--size", "debug")
    assert out.code == 2 and "--data: analyze-input needs the dataset" in out.stderr


def test_analyze_input_against_the_cost_model_of_a_target(run_cli, mnist_data: Path) -> None:  # type: ignore[no-untyped-def]
    base = ("analyze-input", "-p", "fc_mnist", "--size", "debug", "--data", str(mnist_data), "-b", "8")
    fast = ("--max-workers", "1", "--prefetch-depths", "2", "--seconds", "0.1")
    out = run_cli(*base, "--target", "h100", *fast, "--json")
    assert out.code == 0, out.stderr
    analysis = out.json()
    assert analysis["consumption_source"].startswith("estimated by the cost model for NVIDIA H100")
    priced = run_cli("estimate", "-p", "fc_mnist", "--size", "debug", "-b", "8", "--target", "h100", "--json")
    assert analysis["consumption_samples_per_sec"] == priced.json()["estimate"]["samples_per_sec"]
    out = run_cli(*base, "--target", "h100", "--consumption-rate", "5", *fast)
    assert out.code == 2 and "--target: give --target or --consumption-rate, not both" in out.stderr


def test_advise_tells_its_listener_each_stage_in_order(mnist_data: Path) -> None:
    from flowrate.config import RunConfig
    from flowrate.harness.analyze_input import PipelinePoint
    from flowrate.harness.input_advice import InputSetup, advise, set_up

    heard: list[tuple[object, ...]] = []

    class Listener:
        def measuring(self, setup: InputSetup) -> None:
            heard.append(("measuring", setup.batch_size))

        def planned(self, rate: float, source: str, configurations: int) -> None:
            heard.append(("planned", rate, source, configurations))

        def point(self, point: PipelinePoint) -> None:
            heard.append(("point", point.workers, point.prefetch))

    config = RunConfig(problem="fc_mnist", size="debug", data_dir=str(mnist_data), batch_size=4, device="cpu")
    setup = set_up(config, get_problem("fc_mnist", "debug"))
    analysis = advise(setup, Listener(), given_rate=300.0, max_workers=1, depths=[2], seconds_each=0.05)
    assert heard == [("planned", 300.0, "given (--consumption-rate)", 2), ("point", 0, None), ("point", 1, 2)]
    assert [(p.workers, p.prefetch) for p in analysis.points] == [(0, None), (1, 2)]
