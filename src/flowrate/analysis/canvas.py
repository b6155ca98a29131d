"""How every flowrate figure looks: a fixed-size Agg figure, safe text, and axes in the tables' units.

Every plot builds a ``matplotlib.figure.Figure`` of its own (never pyplot, whose global figure
list would leak state into a user's session) at a fixed size and resolution, so a saved PNG is
always WIDTH_PX x HEIGHT_PX. Text taken from records (problem names, tags, devices) is drawn
literally: '$' is escaped so that matplotlib never reads it as mathtext.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import EngFormatter, FuncFormatter

from flowrate.errors import FlowrateError
from flowrate.results.metrics import Metric
from flowrate.units import si

FIGSIZE_IN = (8.0, 5.0)
DPI = 200
WIDTH_PX, HEIGHT_PX = round(FIGSIZE_IN[0] * DPI), round(FIGSIZE_IN[1] * DPI)

FRONT_COLOUR = "#d62728"
GREY = "#9a9a9a"
_MAX_LEGEND_INSIDE = 6  # more lines than this and the legend moves beside the axes
_TITLE_CHARS = 80  # at the title's font size, what fits across the figure
MAX_FACETS = 9  # panels in one figure (3 x 3) before they get too small to read


def plain(text: object) -> str:
    """Text from a record, made safe to draw: matplotlib reads '$…$' as mathtext otherwise."""
    return str(text).replace("$", r"\$")


def new_figure() -> Figure:
    fig = Figure(figsize=FIGSIZE_IN, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # Agg, attached to this figure only: no global backend switch
    return fig


def title(ax: Axes, text: str, columns: int = 1) -> None:
    """A title that wraps rather than running off its axes (long problem or device names);
    ``columns``: how many axes share the figure's width."""
    width = _TITLE_CHARS // columns
    ax.set_title("\n".join(textwrap.wrap(plain(text), width)), fontsize="medium" if columns == 1 else "small")


def facets(fig: Figure, count: int) -> list[Axes]:
    """``count`` axes in a grid, each with scales of its own: one per problem, so that figures of
    different problems never share an axis."""
    if count > MAX_FACETS:
        raise FlowrateError(
            f"the runs are of {count} problems; a figure shows at most {MAX_FACETS}, each on axes of its "
            "own: choose fewer runs (e.g. --problem NAME)"
        )
    columns = 1 if count == 1 else 2 if count <= 4 else 3
    rows = math.ceil(count / columns)
    return [fig.add_subplot(rows, columns, i + 1) for i in range(count)]


def columns_of(ax: Axes) -> int:
    """How many axes share the figure's width: 1, or the facets' grid columns."""
    spec = ax.get_subplotspec()
    return 1 if spec is None else spec.get_gridspec().ncols


def fit_panel(ax: Axes) -> None:
    """Smaller labels and ticks on a facet, so that neighbours' labels do not run into each other."""
    if columns_of(ax) == 1:
        return
    ax.xaxis.label.set_fontsize("small")
    ax.yaxis.label.set_fontsize("small")
    ax.tick_params(labelsize="small")


def heading(fig: Figure, text: str) -> None:
    """The figure's title above its facets."""
    fig.suptitle("\n".join(textwrap.wrap(plain(text), _TITLE_CHARS)), fontsize="medium")


def axis_label(metric: Metric) -> str:
    """'samples/s', 'power (W)', 'MFU': the label, with the unit when it says more (bytes are
    written on the ticks instead: 200 MB)."""
    if not metric.unit or metric.unit in (metric.label, "B"):
        return metric.label
    return f"{metric.label} ({metric.unit})"


def tick_format(ax: Axes, metric: Metric, which: str) -> None:
    """Bytes as 200 MB, MFU as 41%: what the tables print, rather than 2e8 and 0.41."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if metric.unit == "B":  # as many digits as tell the ticks apart: 388.252 MB, 388.256 MB
        axis.set_major_formatter(EngFormatter(unit="B", sep=" "))
    elif metric.name == "mfu":
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0%}"))


def log_axis_if_wide(ax: Axes, values: Sequence[float], which: str) -> None:
    """A log axis when the values span more than two decades, its ticks read 100, 1 k, 10 k."""
    positive = [v for v in values if v > 0]
    if len(positive) == len(values) and positive and max(positive) / min(positive) > 100:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        axis = ax.xaxis if which == "x" else ax.yaxis
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: si(v)))


def legend(ax: Axes, entries: int) -> None:
    if entries <= 1:  # one line: the title already says what it is
        return
    if entries <= _MAX_LEGEND_INSIDE:
        ax.legend(fontsize="small", loc="best")
    else:
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def footnote(fig: Figure, text: str) -> None:
    """A line under the plot; the layout keeps the axes (and their labels) clear of it."""
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0, 0.035, 1, 0.965))
    fig.text(0.01, 0.008, text, fontsize="x-small", color="#555555", ha="left", va="bottom")
