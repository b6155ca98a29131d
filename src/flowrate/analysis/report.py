"""The HTML report: one self-contained file that shows a set of runs to someone without flowrate.

Self-contained means no request leaves the page: CSS is inline, plots are PNGs in data: URIs, no
script, no web font, no link to anything outside the file (a report mailed or archived must read
the same in ten years, offline). Every string that comes from a record — tags, problem names,
device and CPU names, warnings, command lines — can hold anything a user or a machine wrote, so
each is escaped (flowrate.analysis.html.e) before it reaches the page.

The page and its tables are built here; the plotted sections, one figure per problem, are
flowrate.analysis.report_plots'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flowrate._version import __version__
from flowrate.analysis import (
    plots_estimate,
    plots_history,
    plots_serving,
    report_oracle,
    report_plots,
    report_profile,
)
from flowrate.analysis.estimate_drift import Pricer
from flowrate.analysis.grouping import problem_of
from flowrate.analysis.html import MISSING, e, show_value, table, when, whole_rate
from flowrate.analysis.survey_table import surveys_section
from flowrate.errors import FlowrateError
from flowrate.measure.census import census_line
from flowrate.results.environment import CpuInfo, DeviceInfo, Environment, PythonInfo, Software, TorchInfo
from flowrate.results.identity import load_label
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.sections import Kind
from flowrate.results.store import StoredRun

# --- sections ------------------------------------------------------------------------------------


def _summary(runs: Sequence[StoredRun], surveys: int) -> str:
    problems = sorted({problem_of(r) for r in runs})
    devices = sorted({r.device_name or r.device_type or "?" for r in runs})
    dates = sorted(r.created_at for r in runs if r.created_at)
    span = f"{when(dates[0])} to {when(dates[-1])}" if dates else MISSING
    facts = [
        ("runs", str(len(runs))),
        (f"problem{'s' if len(problems) != 1 else ''}", ", ".join(problems)),
        (f"device{'s' if len(devices) != 1 else ''}", ", ".join(devices)),
        ("recorded", span),
    ]
    if surveys:
        facts.insert(1, ("surveys", str(surveys)))
    items = "".join(f"<div><dt>{e(k)}</dt><dd>{e(v)}</dd></div>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>'


def _throughput_cell(result: Result) -> str:
    s = result.summary
    cell = e(whole_rate(s.samples_per_sec))
    if s.ci95_low_samples_per_sec is not None and s.ci95_high_samples_per_sec is not None:
        half = (s.ci95_high_samples_per_sec - s.ci95_low_samples_per_sec) / 2
        cell += (
            f'<span class="ci" title="mean interval rate ± half its 95% confidence interval">'
            f"{e(whole_rate(s.mean_samples_per_sec))} ± {e(whole_rate(half))}</span>"
        )
    return cell


def _precision_cell(run: StoredRun) -> str:
    """The requested precision and, under it, the census of the formats that carried the FLOPs."""
    cell = e(run.precision or MISSING)
    counted = run.result.operators.census if run.result.operators is not None else None
    if counted is not None:
        device_type = run.result.environment.device_type
        line = census_line(counted, device_type)
        cell += f'<span class="ci census" title="precision census">{e(line)}</span>'
    return cell


def _batch_or_load(run: StoredRun) -> str:
    """The batch size; for a serving run, which has none, the load its figures were measured under."""
    if run.mode == "serve":
        return load_label(run.result)
    return str(run.batch_size) if run.batch_size is not None else MISSING


def _runs_table(runs: Sequence[StoredRun]) -> str:
    header = [
        "run", "created", "tags", "problem", "mode", "precision", "execution", "device", "batch or load",
        "samples/s", "MFU", "samples/J", "peak memory", "loss reached",
    ]  # fmt: skip
    rows = []
    for run in runs:
        result = run.result
        rows.append(
            [
                f'<code id="run-{e(run.run_id)}">{e(run.run_id)}</code>',
                f'<span class="nowrap">{e(when(run.created_at, zone=False))}</span>',
                e(", ".join(run.tags) or MISSING),
                e(problem_of(run)),
                e(run.mode or MISSING),
                _precision_cell(run),
                e(run.execution or MISSING),
                e(run.device_name or run.device_type or MISSING),
                e(_batch_or_load(run)),
                _throughput_cell(result),
                e(show_value("mfu", METRICS["mfu"].value(result))),
                e(show_value("samples_per_joule", METRICS["samples_per_joule"].value(result))),
                e(show_value("peak_memory_bytes", METRICS["peak_memory_bytes"].value(result))),
                e(show_value("final_loss", METRICS["final_loss"].value(result))),
            ]
        )
    legend = (
        '<p class="note">Times in UTC. samples/s is GlobalRate (samples over seconds of the timed '
        "window); under it, the mean interval rate ± half its 95% confidence interval.</p>"
    )
    return legend + table(header, rows, table_id="runs", numeric=(8, 9, 10, 11, 12, 13))


@dataclass(frozen=True)
class _EnvGroup:
    rows: tuple[tuple[str, str], ...]
    runs: list[StoredRun]


def _environment_rows(env: Environment) -> tuple[tuple[str, str], ...]:
    """What identifies a machine and software stack, one line per part, None-safe."""

    def join(*parts: Any) -> str:
        return ", ".join(str(p) for p in parts if p not in (None, "", [])) or MISSING

    device, cpu = env.device or DeviceInfo(), env.cpu or CpuInfo()
    torch, python = env.torch or TorchInfo(), env.python or PythonInfo()
    software = env.flowrate or Software()
    cores, commit = cpu.logical_cores, software.commit
    return (
        ("device", join(device.name, device.type)),
        ("CPU", join(cpu.model, f"{cores} logical cores" if cores else None)),
        ("torch", join(torch.version, f"{torch.num_threads} threads" if torch.num_threads else None)),
        ("CUDA", join(torch.cuda, device.driver_version)),
        ("Python", join(python.version, python.implementation)),
        (
            "flowrate",
            join(
                software.version,
                commit[:12] if isinstance(commit, str) else None,
                "uncommitted changes" if software.dirty else None,
            ),
        ),
        ("hostname", join(env.hostname)),
        ("OS", join(env.os.platform if env.os else None)),
    )


def _environments(runs: Sequence[StoredRun]) -> str:
    groups: dict[tuple[tuple[str, str], ...], _EnvGroup] = {}
    for run in runs:
        rows = _environment_rows(run.result.environment)
        groups.setdefault(rows, _EnvGroup(rows, [])).runs.append(run)
    parts = []
    for n, group in enumerate(groups.values(), start=1):
        facts = table(None, [[f"<b>{e(k)}</b>", e(v)] for k, v in group.rows], table_id=f"env-{n}")
        commands = "".join(
            f"<li><code>{e(r.run_id)}</code> <code class=cmd>{e(_command(r.result))}</code></li>"
            for r in group.runs
        )
        count = f"{len(group.runs)} run{'s' if len(group.runs) != 1 else ''}"
        parts.append(
            f'<div class="env"><h3>Environment {n} ({count})</h3>{facts}'
            f"<details><summary>command lines</summary><ul>{commands}</ul></details></div>"
        )
    return "".join(parts)


def _command(result: Result) -> str:
    line = result.environment.command_line
    if isinstance(line, list):
        return " ".join(str(part) for part in line)
    return MISSING


def _warnings(runs: Sequence[StoredRun]) -> str:
    warned = [r for r in runs if r.result.warnings]
    if not warned:
        return '<p class="note">No run recorded a measurement warning.</p>'
    parts = [f"<p>{len(warned)} of {len(runs)} runs recorded warnings about their measurement.</p>"]
    for run in warned:
        items = "".join(f"<li>{e(w)}</li>" for w in run.result.warnings)
        parts.append(
            f'<div class="warn"><a href="#run-{e(run.run_id)}"><code>{e(run.run_id)}</code></a> '
            f"{e(problem_of(run))}, batch {e(run.batch_size)}<ul>{items}</ul></div>"
        )
    return "".join(parts)


# --- the page ------------------------------------------------------------------------------------

CSS = """
:root { color-scheme: light; --muted: #5f6b7a; --line: #d9dee5; --accent: #2c5d9c; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1d2430; background: #fff; margin: 0 auto; padding: 24px 28px 48px; max-width: 1320px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.05em; margin: 18px 0 6px; }
.generated, .note, figcaption, .ci { color: var(--muted); }
.note { font-size: 0.93em; }
nav { margin: 12px 0 4px; font-size: 0.93em; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
a { color: var(--accent); }
.facts { display: flex; flex-wrap: wrap; gap: 8px 28px; margin: 14px 0; }
.facts div { min-width: 110px; }
.facts dt { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.04em; color: var(--muted); }
.facts dd { margin: 0; font-weight: 600; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 7px; text-align: left; vertical-align: top; }
.nowrap { white-space: nowrap; }
#runs td:nth-child(8) { min-width: 8em; }
th { background: #f3f5f8; font-weight: 600; vertical-align: bottom; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:hover { background: #f8fafc; }
.ci { display: block; font-size: 0.85em; white-space: nowrap; }
.census { white-space: normal; }
code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
code.cmd { word-break: break-all; }
img.plot { display: block; width: 100%; max-width: 960px; height: auto; margin: 8px 0 4px;
           border: 1px solid var(--line); border-radius: 4px; }
figure { margin: 18px 0; }
figcaption { font-size: 0.9em; }
.env, .warn { margin: 10px 0 16px; }
.warn ul { margin: 4px 0; }
.warn li { color: #7a4b00; }
details summary { cursor: pointer; color: var(--muted); font-size: 0.9em; }
.bar { display: inline-block; height: 0.8em; background: var(--accent); margin-right: 6px;
       border-radius: 2px; }
.bar.off { background: #b3261e; }
tr.outside td { background: #fdecea; }
"""

_SECTIONS = [
    ("runs", "Runs"),
    ("pareto", "Pareto frontier"),
    ("oracle", "Best configuration per option"),
    ("throughput", "Throughput against batch size"),
    ("energy", "Energy"),
    ("rates", "Rate and GlobalRate over time"),
    ("history", "History and steps"),
    ("estimate", "Estimate against measurement"),
    ("profile", "Where the time goes"),
    ("serving", "Serving"),
    ("surveys", "Machine surveys"),
    ("environment", "Environment"),
    ("warnings", "Measurement warnings"),
]


def render_report(
    runs: Sequence[StoredRun | Result], *, title: str = "flowrate report", reprice: Pricer | None = None
) -> str:
    """The report on ``runs`` (in the order given) as one HTML document; ``reprice`` prices, for
    the estimate section, runs that recorded no prediction (flowrate.estimate.reprice)."""
    if not runs:
        raise FlowrateError("no runs to report: record some with `flowrate run` or `flowrate sweep`")
    given = [r if isinstance(r, StoredRun) else StoredRun.from_result(r) for r in runs]
    surveys = [r.result for r in given if r.result.kind is Kind.SURVEY]  # no throughput: a section apart
    stored = [r for r in given if r.result.kind is not Kind.SURVEY]
    body = {
        "runs": _runs_table(stored),
        "pareto": report_plots.pareto(stored),
        "oracle": report_oracle.section(stored),
        "throughput": report_plots.throughput(stored),
        "energy": report_plots.energy(stored),
        "rates": report_plots.rates(stored),
        "history": plots_history.section([r.result for r in stored]),
        "estimate": plots_estimate.section(stored, reprice),
        "profile": report_profile.section(stored),
        "serving": plots_serving.section([r.result for r in stored]),
        "surveys": surveys_section(surveys),
        "environment": _environments(stored),
        "warnings": _warnings(stored),
    }
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    shown = [(key, name) for key, name in _SECTIONS if key != "surveys" or surveys]
    nav = "".join(f'<a href="#{key}">{e(name)}</a>' for key, name in shown)
    sections = "".join(f'<section id="{key}"><h2>{e(name)}</h2>{body[key]}</section>' for key, name in shown)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="flowrate {e(__version__)}">'
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{e(title)}</h1>"
        f'<p class="generated">Generated {e(now)} by flowrate {e(__version__)}. samples/s is GlobalRate: '
        "samples over seconds of the whole timed window.</p>"
        f"{_summary(stored, len(surveys))}<nav>{nav}</nav></header>"
        f"<main>{sections}</main></body></html>\n"
    )
