"""Record a real grid on this machine as a table that search benchmarks and tests replay.

Runs `flowrate sweep` (the real command: every point a fresh process, recorded in a store) over
transformer sizes × batch sizes × precision × optimizer, training on one CPU thread, ``--repeats`` times
(whole grid after whole grid, each a sweep of its own name, so a point's repeats are minutes
apart and the between-run spread includes the machine's drift). Then reads the store back and
writes, per point:

    samples_per_sec   mean and sd over the repeats (the between-run spread, n = repeats), each
                      repeat's figure, and the mean of the runs' own interval sd (the within-run
                      spread, which understates the between-run one)
    peak_memory_bytes the figure every reader uses (results.metrics.peak_memory_bytes): on the
                      CPU the process's peak resident set
    wall_s            mean wall time of the point, from the sweep's records: the time between a
                      point's record and the previous one (or the start of the sweep command that
                      ran it), so process start, imports, model build, preheat and timing
    status            done, or oom (failed for memory), or failed

and ``startup_s``: the median of wall_s - (preheat_s + timed_duration_s), what a point costs
beyond what it measures.

    python benchmarks/record_grid.py                     # the default grid, 2 repeats
    python benchmarks/record_grid.py --store grid.db     # keep the store (and resume into it)

It takes about half an hour: the recorded table's 2 repeats of 64 points took 1811 s
(total_wall_s) on the 2-vCPU VM while other work shared it. Record it on a quiet machine: a
shared one's contention becomes the between-run spread (the recorded table's median CV is 0.56).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowrate.results.metrics import peak_memory_bytes
from flowrate.results.store import Store
from record import Figure, record  # beside this script

HERE = Path(__file__).parent
DEFAULT_OUT = HERE / "data" / "grid_transformer_cpu.json"
BASE = ["-p", "transformer", "--mode", "train", "--device", "cpu", "--duration", "1", "--preheat", "2"]
BASE += ["--min-steps", "3", "--threads", "1"]
GRID = [
    "-g",
    "size=debug,mini",
    "-g",
    "batch_size=1..128",
    "-g",
    "precision=fp32,bf16",
    "-g",
    "optimizer=adamw,sgd",
]
PARAMS = ("size", "batch_size", "precision", "optimizer")


def sweep_argv(store: Path, name: str) -> list[str]:
    return ["flowrate", "sweep", *BASE, *GRID, "--store", str(store), "--name", name]


def run_repeats(
    store: Path, repeats: int, after: Callable[[dict[str, list[float]]], None]
) -> dict[str, list[float]]:
    """Run the grid ``repeats`` times, each run again (up to twice) for points that failed other
    than for memory (a crash: on a shared checkout, another's half-written edit); ``after`` each
    repeat, given when each sweep command so far started (epoch seconds)."""
    started: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    for i in range(repeats):
        name = f"grid-rep{i + 1}"
        for attempt in range(3):
            if attempt and not _crashed(store, name):
                break
            started.setdefault(name, []).append(time.time())
            print(
                f"[{time.perf_counter() - t0:6.0f} s] {name} (attempt {attempt + 1})",
                file=sys.stderr,
                flush=True,
            )
            retry = ["--retry-failed"] if attempt else []
            rc = subprocess.run([*sweep_argv(store, name), *retry], check=False).returncode
            if rc not in (0, 1):
                raise SystemExit(f"{name}: flowrate sweep exited {rc}")
        after(started)
    return started


def _crashed(store: Path, name: str) -> bool:
    with Store(store) as db:
        sweep_id = next(s["sweep_id"] for s in db.sweeps() if s["name"] == name)
        points = db.sweep_points(sweep_id).values()
    return any(p.status == "failed" and "memory" not in (p.reason or "").lower() for p in points)


def read_points(
    store: Path, started: dict[str, list[float]]
) -> tuple[list[dict[str, Any]], list[float], float]:
    """Each point's figures over the repeats, each run's start-up overhead, and the wall time of all
    the points together (the retries' included). A point's wall time
    runs from the previous record of its sweep, or the start of the command that ran it (or of the
    sweep, as the store recorded it), whichever is later."""
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    overheads: list[float] = []
    total = 0.0
    with Store(store) as db:
        sweeps = {s["name"]: s for s in db.sweeps()}
        for name, starts in started.items():
            opened = dt.datetime.fromisoformat(sweeps[name]["created_at"]).timestamp()
            previous = opened
            points = sorted(db.sweep_points(sweeps[name]["sweep_id"]).values(), key=lambda p: p.recorded_at)
            for point in points:
                at = dt.datetime.fromisoformat(point.recorded_at).timestamp()
                begun = max([opened, previous, *(t for t in starts if t < at)])
                entry: dict[str, Any] = {"status": point.status, "reason": point.reason, "wall_s": at - begun}
                previous = at
                total += entry["wall_s"]
                if point.run_id is not None:
                    result = db.get(point.run_id).result
                    summary = result.summary
                    entry["samples_per_sec"] = summary.samples_per_sec
                    entry["interval_sd"] = summary.stdev_samples_per_sec
                    entry["peak_memory_bytes"] = peak_memory_bytes(result)
                    measured = summary.preheat_s + summary.timed_duration_s
                    overheads.append(entry["wall_s"] - measured)
                key = tuple(point.params[p] for p in PARAMS)
                by_key.setdefault(key, []).append(entry)
    points = [_point(dict(zip(PARAMS, key, strict=True)), runs) for key, runs in sorted(by_key.items())]
    return points, overheads, total


def _point(params: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in runs if r["status"] == "done"]
    point: dict[str, Any] = {
        "params": {**params, "threads": 1, "compile": False},
        "wall_s": round(statistics.fmean(r["wall_s"] for r in runs), 3),
    }
    if not done:
        reason = " ".join(r["reason"] or "" for r in runs).lower()
        point["status"] = "oom" if "memory" in reason else "failed"
        point["reason"] = runs[0]["reason"]
        return point
    rates = [r["samples_per_sec"] for r in done]
    memory = [float(r["peak_memory_bytes"]) for r in done if r["peak_memory_bytes"] is not None]
    interval_sds = [r["interval_sd"] for r in done if r["interval_sd"] is not None]
    point["status"] = "done"
    point["samples_per_sec"] = {
        "mean": statistics.fmean(rates),
        "sd": statistics.stdev(rates) if len(rates) > 1 else None,
        "n": len(rates),
        "runs": rates,
        "interval_sd": statistics.fmean(interval_sds) if interval_sds else None,
    }
    point["peak_memory_bytes"] = {
        "mean": statistics.fmean(memory) if memory else None,
        "sd": statistics.stdev(memory) if len(memory) > 1 else None,
    }
    return point


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--store", type=Path, help="keep the runs in this store (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--note", default="", help="added to the table's note (e.g. how busy the machine was)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "grid.db"
        run_repeats(store, args.repeats, lambda started: write_table(store, started, args.out, args.note))
    table = json.loads(args.out.read_text())
    done = sum(p["status"] == "done" for p in table["points"])
    cv_note = "median over the points"
    figures = [
        Figure("points done", done, f"of {len(table['points'])}"),
        Figure("wall time of the points", table["total_wall_s"], "s"),
        Figure("start-up per point", table["startup_s"], "s", note="median"),
        Figure("between-run CV", table["median_between_run_cv"], "fraction", note=cv_note),
        Figure("within-run interval CV", table["median_interval_cv"], "fraction", note=cv_note),
    ]
    record("record_grid", figures, note=f"{table['repeats']} repeats; table {args.out.name}")


def write_table(store: Path, started: dict[str, list[float]], out: Path, note: str) -> None:
    """The table of the repeats recorded so far (written after each: a long grid is usable early)."""
    points, overheads, wall = read_points(store, started)
    repeats = len(started)
    table = {
        "problem": "transformer",
        "hardware": f"{_cpu_model(store)}, {os.cpu_count()} logical cores, {platform.machine()}",
        "command": " ".join(shlex.quote(a) for a in sweep_argv(Path("STORE"), "NAME")),
        "date": dt.date.today().isoformat(),
        "duration_s": float(BASE[BASE.index("--duration") + 1]),
        "repeats": repeats,
        "total_wall_s": round(wall, 1),
        "startup_s": round(statistics.median(overheads), 3),
        "median_between_run_cv": _median_cv(points, "sd"),
        "median_interval_cv": _median_cv(points, "interval_sd"),
        "note": (
            "training, CPU, one thread, compile off (torch.compile per point costs tens of seconds here). "
            "threads=2 was tried and dropped: on this 2-core machine shared with other work it measured "
            "the oversubscription (10-300x slower than threads=1, erratic), not the configuration. "
            f"The grid ran {repeats} time(s), whole grid after whole grid; samples_per_sec.sd is the "
            "between-run sd over those repeats (null with one), interval_sd the mean within-run interval "
            "sd. peak_memory_bytes is the process's peak RSS. wall_s is a point's whole cost in a sweep "
            "(process start to record). " + note
        ).strip(),
        "points": points,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")
    done = sum(p["status"] == "done" for p in points)
    print(f"{len(points)} points ({done} done), {wall:.0f} s of points; start-up {table['startup_s']} s")
    print(f"wrote {out} ({repeats} repeats)")


def _median_cv(points: list[dict[str, Any]], spread: str) -> float | None:
    """The median over points of a samples/s spread relative to the point's mean."""
    cvs = [
        r[spread] / r["mean"] for p in points if (r := p.get("samples_per_sec")) and r.get(spread) is not None
    ]
    return round(statistics.median(cvs), 4) if cvs else None


def _cpu_model(store: Path) -> str:
    """The CPU as the runs recorded it."""
    with Store(store) as db:
        cpu = db.runs()[0].result.environment.cpu
    return str((cpu.model if cpu else None) or "unknown CPU")


if __name__ == "__main__":
    main()
