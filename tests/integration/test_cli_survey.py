"""`flowrate survey` end to end on this CPU at the smallest settings: recorded, shown, --strict's
exit code, a malformed band file, and a later run's MFU against the stored survey's maximum."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

TINY = ("--quick", "--seconds", "0.05", "--shapes", "64x64x64,128x64x32", "--threads", "1")


def test_survey_records_shows_and_strict_passes(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("survey", *TINY, "--strict", "--json")
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["kind"] == "survey"
    names = [f["name"] for f in data["survey"]["figures"]]
    assert names == [
        "matmul fp32",
        "matmul bf16",
        "attention fp32",
        "attention bf16",
        "copy",
        "h2d pinned",
        "d2h pinned",
        "h2d pageable",
        "d2h pageable",
        "duplex pinned",
        "launch",
        "allreduce busbw",
        "train transformer/debug",
        "infer transformer/debug",
        "generate transformer/debug",
        "power",
    ]
    values = {f["name"]: f["value"] for f in data["survey"]["figures"]}
    measured = ("matmul", "attention", "copy", "launch", "train", "infer", "generate")
    assert all(values[n] > 0 for n in names if n.split()[0] in measured)
    assert all(values[n] is None for n in names if n.split()[0] in ("h2d", "d2h", "duplex", "allreduce"))
    assert "recorded as run" in out.stderr

    shown = run_cli("show", data["run_id"])
    assert shown.code == 0, shown.stderr
    assert "flowrate survey" in shown.stdout and "matmul fp32" in shown.stdout

    # a later run on this machine reads its MFU against the survey's fp32 matmul maximum
    run = run_cli(
        "run",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--preheat",
        "1",
        "--steps",
        "2",
        "--threads",
        "1",
        "--json",
    )
    assert run.code == 0, run.stderr
    flops = run.json()["flops"]
    assert flops["measured_peak_source"] == f"survey {data['run_id']}"
    assert flops["measured_peak_flops"] == values["matmul fp32"]
    assert f"measured max (survey {data['run_id']})" in run.stderr


def test_strict_exits_1_naming_the_figure_outside_its_band(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bands = tmp_path / "bands.json"
    bands.write_text(json.dumps({"launch": [0, 1e-12]}))  # no op dispatches in a picosecond
    out = run_cli(
        "survey", *TINY, "--no-model", "--precision", "fp32", "--bands", str(bands), "--strict", "--no-store"
    )
    assert out.code == 1
    assert "--strict: 1 figure(s) outside their band: launch" in out.stderr
    assert "OUTSIDE" in out.stderr
    lenient = run_cli(
        "survey", *TINY, "--no-model", "--precision", "fp32", "--bands", str(bands), "--no-store"
    )
    assert lenient.code == 0, lenient.stderr


def test_bad_input_is_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bands = tmp_path / "bands.json"
    bands.write_text('{"copy": [2, 1]}')
    out = run_cli("survey", "--bands", str(bands), "--strict")
    assert out.code == 2
    assert "'copy' must be [low, high]" in out.stderr and "Traceback" not in out.stderr
    shapes = run_cli("survey", "--shapes", "64x64")
    assert shapes.code == 2 and "is not MxNxK" in shapes.stderr


def test_survey_under_torchrun_measures_the_allreduce() -> None:
    """Two gloo ranks: the record holds the all-reduce's bus bandwidth alone, printed once."""
    survey = ("survey", "--quick", "--seconds", "0.1", "--no-store", "--json")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "flowrate", *survey],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout)["survey"]["figures"]
    assert [f["name"] for f in figures] == ["allreduce busbw"]
    assert figures[0]["value"] > 0 and "2 ranks (gloo)" in figures[0]["detail"]
    assert done.stderr.count("allreduce busbw:") == 1  # rank 0 alone speaks


def test_a_device_flag_under_torchrun_is_refused() -> None:
    # a subprocess: a failed rank leaves through os._exit (cli/boundary.py), which would end pytest
    launch = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "flowrate", "survey", "--quick", "--shapes", "64x64x64"],
        env={**os.environ, **launch},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert "shapes: applies without torchrun (under it the survey measures the collectives)" in done.stderr


def test_two_surveys_compare_side_by_side_and_draw_a_card(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    small = (*TINY, "--no-model", "--precision", "fp32", "--quiet")
    card = tmp_path / "card.html"
    first = run_cli("survey", *small, "--json", "--html", str(card))
    assert first.code == 0, first.stderr
    page = card.read_text()
    assert page.startswith("<!DOCTYPE html>") and '<table id="figures">' in page
    assert page.count("<tr") == page.count("</tr>") and "<b>attention fp32</b>" in page
    second = run_cli("survey", *small, "--json")
    assert second.code == 0, second.stderr
    a, b = first.json(), second.json()

    out = run_cli("compare", a["run_id"], b["run_id"], "--format", "json")
    assert out.code == 0, out.stderr
    compared = json.loads(out.stdout)
    assert (compared["a"], compared["b"]) == (a["run_id"], b["run_id"])
    values_a = {f["name"]: f["value"] for f in a["survey"]["figures"]}
    values_b = {f["name"]: f["value"] for f in b["survey"]["figures"]}
    assert [f["name"] for f in compared["figures"]] == list(values_a)
    for row in compared["figures"]:
        assert (row["a"], row["b"]) == (values_a[row["name"]], values_b[row["name"]])
        if row["a"]:
            assert row["ratio"] == values_b[row["name"]] / values_a[row["name"]]
    table = run_cli("compare", a["run_id"], b["run_id"])
    assert table.code == 0, table.stderr
    assert "matmul fp32" in table.stdout and "B/A" in table.stdout
    assert "B/A: survey B's figure over A's" in table.stderr

    run = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--steps", "2", "--preheat", "1", "--json")
    assert run.code == 0, run.stderr
    mixed = run_cli("compare", a["run_id"], run.json()["run_id"])
    assert mixed.code == 2
    assert mixed.stderr.count("\n") == 1 and "surveys are compared with surveys only" in mixed.stderr


def test_the_card_must_be_an_html_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("survey", "--html", str(tmp_path / "card.txt"))
    assert out.code == 2
    assert "html: a survey card is one HTML page: name it .html or .htm, not card.txt" in out.stderr
    assert out.stderr.count("\n") == 1


# rank 1: `flowrate survey` that dies (os._exit) a second after its process group is up
DIES = """
import os, runpy, sys, threading, time
import torch.distributed as dist
def die():
    while not dist.is_initialized():
        time.sleep(0.05)
    time.sleep(1.0)
    os._exit(1)
threading.Thread(target=die, daemon=True).start()
sys.argv = ["flowrate", "survey", "--quick", "--seconds", "30", "--no-store"]
runpy.run_module("flowrate", run_name="__main__")
"""


@pytest.mark.slow
def test_a_rank_that_dies_stops_the_survey_with_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launch = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
    survey = [sys.executable, "-m", "flowrate", "survey", "--quick", "--seconds", "30", "--no-store"]
    ranks = [
        subprocess.Popen(
            command,
            env={**os.environ, **launch, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, command in enumerate([survey, [sys.executable, "-c", DIES]])
    ]
    try:
        _, stderr = ranks[0].communicate(timeout=200)  # the guard, not a timing: rank 0 stops on its own
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    assert ranks[0].returncode == 1
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: the data-parallel run stopped on rank 0: rank 1 stopped responding (its connection "
        "closed: it died or was killed; see its output)"
    ]
    assert "Traceback" not in stderr
