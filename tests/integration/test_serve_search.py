"""--find-max-rate against a real server: the fault server's ``queue`` mode (one request at a time,
so TTFT grows with the rate) within a budget, and one Ctrl-C stopping the whole search. The run on
a real `transformers serve` is in test_serve_bench.py, beside its fixture."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fault_server
from flowrate.results.schema import Result

# p90 at 90%: 22 requests a point; the queue's 20 ms service passes low rates and fails high ones
SEARCH = ("--find-max-rate", "--slo", "ttft_ms=150", "--slo-percentile", "90", "--confidence", "0.9")
LOAD = ("--model", "m", "--input-len", "4", "--output-len", "3", "--no-store")


def _search(out: Path, rate: str, budget: str) -> list[str]:
    url = fault_server.url("queue")
    return [sys.executable, "-m", "flowrate", "serve-bench", "--url", url, *LOAD, "--rate", rate, *SEARCH,
            "--budget", budget, "--out", str(out)]  # fmt: skip


@pytest.mark.slow  # a 20 s budget spent in full (test_serving_search.py checks the rule on a fake clock)
def test_a_search_ends_within_its_budget_names_a_rate_and_stores_every_point(tmp_path: Path) -> None:
    fault_server.start()
    out, plot = tmp_path / "search.json", tmp_path / "search.png"
    begin = time.monotonic()
    done = subprocess.run(
        [*_search(out, "5", "20s"), "--plot", str(plot)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - begin
    assert done.returncode == 0, done.stderr
    assert took <= 20.0  # the budget is a bound the code enforces, from the process's start
    assert "22 requests a point" in done.stderr and "n = ceil(ln(1 - 0.9) / ln(0.9))" in done.stderr
    assert "max rate meeting the SLO" in done.stderr
    serving = Result.load(out).serving
    assert serving is not None and not serving.partial
    search = serving.search
    assert search is not None
    assert search.requests_per_point == 22 and search.percentile == 90.0
    assert search.stopped in ("resolution", "budget") and (search.spent_s or 0) <= 20.0
    assert len(search.points) >= 2 and search.points[0].rate == 5.0
    for point in search.points:
        assert isinstance(point.extra["traces"], list) and len(point.extra["traces"]) == point.requests
        assert point.partial or point.requests == 22
    found = search.max_rate
    assert found is not None and f"{found:.4g} req/s" in done.stderr
    assert search.headline_point is not None
    headline = search.points[search.headline_point]
    assert headline.rate == found == serving.rate and serving.requests == 22
    assert plot.stat().st_size > 0


@pytest.mark.slow  # a search measured until its first point ends (~17 s)
def test_one_ctrl_c_stops_the_whole_search_and_keeps_the_points_measured(tmp_path: Path) -> None:
    fault_server.start()
    out = tmp_path / "cut.json"
    # 2 req/s: the first point takes about 11 s and passes, the second (4 req/s) about 6 s
    cli = subprocess.Popen(_search(out, "2", "10m"), stderr=subprocess.PIPE, text=True)
    assert cli.stderr is not None
    seen = []
    for line in cli.stderr:
        seen.append(line)
        if line.strip().startswith("2 req/s:"):  # the first point's verdict: the second begins
            break
    time.sleep(1.0)  # into the second point's load
    cli.send_signal(signal.SIGINT)  # once
    _, rest = cli.communicate(timeout=60)
    stderr = "".join(seen) + rest
    assert cli.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    serving = Result.load(out).serving
    assert serving is not None and serving.partial
    search = serving.search
    assert search is not None
    assert search.stopped == "interrupted"
    first, cut = search.points
    assert not first.partial and first.verdict == "pass" and first.requests == 22
    assert cut.partial and cut.verdict is None and cut.cut == "interrupted" and cut.latency_ms is None
    assert cut.rate == 4.0 and (cut.requests or 0) < 22 + 1
    assert search.max_rate == 2.0 and search.headline_point == 0
    assert serving.requests == 22  # the headline is the measured point, not the cut one
