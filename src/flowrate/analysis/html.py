"""The HTML report's pieces: escaped text, figures as the tables print them, tables and plots.

Every string that comes from a record can hold anything a user or a machine wrote, so e() is
the only way one reaches the page. Plots are PNGs in data: URIs, so the page fetches nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Callable, Sequence

from matplotlib.figure import Figure

from flowrate.analysis import canvas, plots
from flowrate.errors import FlowrateError
from flowrate.results.metrics import Metric
from flowrate.units import gib, rate, si

REPORT_DPI = 150  # 1200 x 750 px: sharp at the page's 960 px width, ~60 kB per plot
MISSING = "—"


def e(value: object) -> str:
    """Escaped text: the only way a record's string reaches the page."""
    return html.escape(str(value), quote=True)


def show_value(metric: Metric | str, value: float | None) -> str:
    """A metric's figure as the CLI's tables print it: 1864, 298 MiB, 41.2%, 0.0123."""
    name = metric if isinstance(metric, str) else metric.name
    if value is None:
        return MISSING
    if name == "peak_memory_bytes":
        return gib(value)
    if name == "mfu":
        return f"{value:.1%}"
    if name == "average_watts":
        return si(value, "W")
    if name == "model_flops_per_sec":
        return si(value, "FLOP/s")
    if name.endswith("per_sec") or name == "samples_per_joule":
        return whole_rate(value)
    return f"{value:.4g}"


def whole_rate(value: float) -> str:
    """Whole numbers from 1000 up (54758, not 54758.234), else rate()'s four significant figures."""
    return f"{value:.0f}" if abs(value) >= 1000 else rate(value)


def when(iso: str, zone: bool = True) -> str:
    """'2026-11-21 05:01 UTC' from an ISO instant; the text as it is when it is not one."""
    try:
        moment = dt.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return iso or MISSING
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if zone and moment.tzinfo is not None else "")


def image(fig: Figure, alt: str) -> str:
    data = base64.b64encode(plots.render(fig, "png", dpi=REPORT_DPI)).decode("ascii")
    width, height = (round(side * REPORT_DPI) for side in canvas.FIGSIZE_IN)
    return (
        f'<img class="plot" src="data:image/png;base64,{data}" width="{width}" height="{height}" '
        f'alt="{e(alt)}">'
    )


def plot(make: Callable[[], Figure], alt: str) -> str:
    """The plot, or a note saying why there is none (a report shows what it can)."""
    try:
        return image(make(), alt)
    except FlowrateError as why:
        return note(str(why))


def note(text: str) -> str:
    return f'<p class="note">{e(text)}</p>'


def table(
    header: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    *,
    table_id: str = "",
    numeric: Sequence[int] = (),
    row_classes: Sequence[str] = (),
) -> str:
    """A table from cells that are already HTML (escaped by the caller); ``row_classes`` gives
    the rows, in order, a class each ("" for none)."""
    ident = f' id="{table_id}"' if table_id else ""
    cells = "".join(
        f"<th{' class=num' if i in numeric else ''}>{e(h)}</th>" for i, h in enumerate(header or [])
    )
    head = f"<thead><tr>{cells}</tr></thead>" if header else ""
    classes = [*row_classes, *[""] * (len(rows) - len(row_classes))]
    body = "".join(
        (f'<tr class="{e(css)}">' if css else "<tr>")
        + "".join(f"<td{' class=num' if i in numeric else ''}>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row, css in zip(rows, classes, strict=False)
    )
    return f'<div class="scroll"><table{ident}>{head}<tbody>{body}</tbody></table></div>'
