"""A survey as one self-contained HTML page: the machine's report card.

The page follows flowrate.analysis.report's rules and style: CSS inline, no script, nothing
fetched, every string from the record escaped (flowrate.analysis.html.e). Each figure is a row:
its value, datasheet value, fraction of it (drawn as a bar), band and verdict, and how it was
found or why it is empty; the environment it was measured in follows.
"""

from __future__ import annotations

from flowrate._version import __version__
from flowrate.analysis.html import MISSING, e, table, when
from flowrate.analysis.report import CSS, _environment_rows
from flowrate.analysis.survey_table import figures_table
from flowrate.errors import FlowrateError
from flowrate.results.schema import Result


def render_card(result: Result, *, title: str | None = None) -> str:
    """The survey in ``result`` as one HTML document; FlowrateError when it holds no survey."""
    survey = result.survey
    if survey is None:
        raise FlowrateError(f"run {result.run_id} is not a survey: record one with `flowrate survey`")
    heading = title or f"flowrate survey: {survey.device or 'this machine'}"
    off = [f for f in survey.figures if f.within_band is False]
    measured = sum(f.value is not None for f in survey.figures)
    facts = [
        ("device", survey.device or MISSING),
        ("figures", f"{measured} of {len(survey.figures)} measured"),
        ("outside their band", str(len(off))),
        ("recorded", when(result.created_at)),
        ("run", result.run_id),
        ("timed", ("quick, " if survey.quick else "") + f"{survey.seconds_per_measurement or 0:g} s each"),
    ]
    items = "".join(f"<div><dt>{e(k)}</dt><dd>{e(v)}</dd></div>" for k, v in facts)
    environment = table(None, [[f"<b>{e(k)}</b>", e(v)] for k, v in _environment_rows(result.environment)])
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="flowrate {e(__version__)}">'
        f"<title>{e(heading)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{e(heading)}</h1>"
        f'<p class="generated">flowrate {e(__version__)}. Each figure against its datasheet value '
        "where the peak table has the device, and its plausibility band (of the datasheet value "
        "where there is one, else of the value itself); a bar of 100 px is the datasheet value.</p>"
        f'<dl class="facts">{items}</dl></header>'
        f'<main><section id="card"><h2>Figures</h2>{figures_table(survey.figures)}</section>'
        f'<section id="environment"><h2>Environment</h2>{environment}</section></main>'
        "</body></html>\n"
    )
