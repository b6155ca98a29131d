"""The prepared GPU check: on a machine with a GPU where torch and CUDA are installed, run the
survey, the GPU tests, the kernels and the streaming ÷ resident comparison, each within its own
time box (all together within 8 minutes), never stopping at a failure, and write every figure and
each step's exit code to one JSON file.

    python3 benchmarks/gpu_check.py                 # writes $OUT/gpu_check.json (./gpu-check-out)
    python3 benchmarks/gpu_check.py --steps survey tests
    python3 benchmarks/gpu_check.py --steps profile-eager profile-compile   # not run by default
    python3 benchmarks/gpu_check.py --steps compile-padded                  # nor this

The two profile steps are left out of the default run (its 8 minutes are spent): they profile
GPT-2 124M's bf16 training step at batch 16, eager and compiled, into OUT/profile-*/ (trace,
operator table, step breakdown), for the question the H200 left open on 2026-11-28: --compile
gave 219.5 samples/s against eager's 216.8 (MFU 0.19), so what bounds the step? The third,
compile-padded, runs the compiled step with the vocabulary padded to 50304 as nanoGPT does.

It runs flowrate from this checkout's src/ (PYTHONPATH), so nothing is installed. flowrate's own
dependencies (click, rich, scipy, psutil, py-cpuinfo, tensorboard, matplotlib, pillow; nvidia-ml-py
for energy) must be importable: the lent H100/H200 image has them all. Where one is missing, carry
it as wheels in .whl/ (README, Development) and this script installs them with pip --no-index into
a folder of its own before the first step. Only the standard library is imported here.

Each step's output goes to OUT/STEP.log; the JSON holds each step's command, exit code (124: its
time box ran out), seconds and the tail of its output, and the survey's figures in full.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from record import RESULTS_ENV, Figure, Target, record  # beside this script; the standard library only

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# name -> (command, seconds): within 8 minutes together, with room for the interpreter's start-ups.
# The survey runs --quick: three GEMM shapes a precision (the largest, where the maximum lies)
# leave its time box room for its other rows (attention per precision, five host-link figures, the
# reference model's training, inference and generation). On an H200 (2026-11-28) the steps took
# 38, 110, 31 and 74 s; the tests' box has the most room, as two of them now run further than then
# (the fresh-process CUDA runs failed at their first read-back).
STEPS: dict[str, tuple[list[str], int]] = {
    "survey": ([PY, "-m", "flowrate", "survey", "--quick", "--strict", "--json", "--no-store"], 90),
    "tests": ([PY, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-p", "no:cacheprovider"], 200),
    "kernels": ([PY, "benchmarks/kernels.py", "--seconds", "1"], 45),
    # the ratio at 16k tokens a step only, where its target starts: each point builds a 1.3B GPT
    # twice (four points overran 90 s on an H200, 2026-11-28)
    "streaming": (
        [PY, "benchmarks/streaming.py", "--parts", "ratio", "--duration", "3", "--tokens", "16384"],
        110,
    ),
}
DEFAULT_STEPS = list(STEPS)
# GPT-2 124M bf16 training at batch 16, profiled; "{out}" is the output folder
_GPT2 = [PY, "-m", "flowrate", "run", "-p", "gpt2", "--precision", "bf16", "-b", "16", "--duration", "5"]
STEPS["profile-eager"] = ([*_GPT2, "--profile", "{out}/profile-eager", "--no-store"], 90)
STEPS["profile-compile"] = ([*_GPT2, "--compile", "--profile", "{out}/profile-compile", "--no-store"], 180)
# nanoGPT pads GPT-2's vocabulary of 50257 to 50304 (a multiple of 64) for its LM head's matmuls
STEPS["compile-padded"] = ([*_GPT2, "--compile", "--vocab-size", "50304", "--no-store"], 150)


PROBE = (
    "import torch, flowrate.cli.main; cuda = torch.cuda.is_available(); "
    "print(torch.__version__, cuda, torch.cuda.get_device_name() if cuda else '')"
)


def _environment(site: Path | None, out: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env[RESULTS_ENV] = str(out / "results")  # the benchmarks' records come back with OUT
    paths = [str(ROOT / "src"), *([str(site)] if site else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.setdefault("FLOWRATE_STORE", str(Path(env.get("TMPDIR", "/tmp")) / "gpu-check-flowrate.db"))
    return env


def _carried_wheels() -> tuple[Path | None, dict[str, object]]:
    """Install .whl/*.whl (carried wheels) into a folder of their own; (None, {}) where none are."""
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if not wheels:
        return None, {}
    site = Path("/tmp/gpu-check-site")
    command = [PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site)]
    done = subprocess.run([*command, *map(str, wheels)], capture_output=True, text=True, check=False)
    return site, {
        "wheels": [w.name for w in wheels],
        "exit_code": done.returncode,
        "tail": done.stderr[-2000:],
    }


def run_step(
    name: str, command: list[str], seconds: int, out: Path, env: dict[str, str]
) -> dict[str, object]:
    """Run one step in its time box; its output to OUT/NAME.log; never raises for its failure."""
    log = out / f"{name}.log"
    start = time.perf_counter()
    with log.open("w") as sink:
        try:
            done = subprocess.run(
                command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=sink, timeout=seconds, check=False
            )
            code, stdout = done.returncode, done.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as late:
            code = 124
            stdout = (late.stdout or b"").decode(errors="replace")
        except OSError as error:
            code, stdout = 127, f"could not start: {error}"
        sink.write("\n--- stdout ---\n" + stdout)
    step: dict[str, object] = {
        "command": " ".join(command[1:] if command[0] == PY else command),
        "time_box_s": seconds,
        "exit_code": code,
        "seconds": round(time.perf_counter() - start, 1),
        "tail": log.read_text(errors="replace")[-3000:],
    }
    if name == "survey":
        try:
            step["result"] = json.loads(stdout)
        except json.JSONDecodeError:
            step["result"] = None
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", nargs="*", choices=list(STEPS), default=DEFAULT_STEPS)
    parser.add_argument(
        "--out", default=os.environ.get("OUT") or "gpu-check-out", help="folder of the JSON and logs"
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    site, wheels = _carried_wheels()
    env = _environment(site, out)
    report: dict[str, object] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "wheels": wheels,
        "steps": {},
    }
    probe = [PY, "-c", PROBE]
    report["probe"] = run_step("probe", probe, 60, out, env)
    steps: dict[str, object] = {}
    for name in args.steps:
        command, seconds = STEPS[name]
        command = [part.replace("{out}", str(out)) for part in command]
        steps[name] = run_step(name, command, seconds, out, env)
        print(f"{name}: exit {steps[name]['exit_code']} in {steps[name]['seconds']} s", flush=True)  # type: ignore[index]
        report["steps"] = steps
        (out / "gpu_check.json").write_text(json.dumps(report, indent=2))  # after each step: nothing lost
    failed = [n for n, s in steps.items() if s["exit_code"] != 0]  # type: ignore[index]
    _record(steps, out, site)
    print(
        f"wrote {out / 'gpu_check.json'}; "
        + (f"failed: {', '.join(failed)}" if failed else "every step passed")
    )
    sys.exit(1 if failed else 0)


def _record(steps: dict[str, object], out: Path, site: Path | None) -> None:
    """The steps' exit codes and seconds and the survey's figures, to OUT/results/gpu_check/
    (copy OUT/results/ into benchmarks/results/ and regenerate RESULTS.md); a failure to record
    is one line, the JSON is already written."""
    figures = []
    for name, step in steps.items():
        assert isinstance(step, dict)
        figures.append(Figure(f"{name} exit code", step["exit_code"], "", Target("==", 0), step["command"]))
        box = f"time box {step['time_box_s']} s"
        figures.append(Figure(f"{name} seconds", step["seconds"], "s", note=box))
    survey = steps.get("survey")
    result = survey.get("result") if isinstance(survey, dict) else None
    if isinstance(result, dict):
        found = result.get("survey", {}).get("figures", [])
        for f in found:
            band = f"band {f.get('band_low')}-{f.get('band_high')}: " if f.get("band_low") is not None else ""
            within = {True: "within", False: "OUTSIDE", None: "no band"}[f.get("within_band")]
            share = f"; {f['fraction']:.1%} of datasheet" if f.get("fraction") is not None else ""
            value, unit = f.get("value"), f.get("unit", "")
            scale = {"FLOP/s": (1e12, "TFLOP/s"), "B/s": (1e9, "GB/s")}.get(unit)
            if scale and value is not None:
                value, unit = value / scale[0], scale[1]
            figures.append(Figure(f"survey {f['name']}", value, unit, None, band + within + share))
        outside = [f["name"] for f in found if f.get("within_band") is False]
        name, count = "survey figures outside their band", f"of {len(found)}"
        figures.append(Figure(name, len(outside), count, Target("==", 0), ", ".join(outside)))
    sys.path[:0] = [str(ROOT / "src"), *([str(site)] if site else [])]  # record reads flowrate's environment
    try:
        record("gpu_check", figures, root=out / "results")
    except Exception as error:
        print(f"not recorded: {type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
