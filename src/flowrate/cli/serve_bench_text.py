"""What `flowrate serve-bench` and `flowrate show` print of a load test: pure functions returning
rows."""

from __future__ import annotations

from flowrate.results.serving import Described, Serving, TurnFigures
from flowrate.results.serving_curve import CurvePoint
from flowrate.results.serving_search import RateSearch, SearchPoint

DEFINITION_TITLES = {"flowrate": "flowrate", "vllm": "vLLM", "genai_perf": "genai-perf"}


def _ms(value: float | None, ci: list[float] | None) -> str:
    shown = f"{value:.2f}"
    return f"{shown} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else shown


def _described(stats: Described | None) -> str:
    if stats is None:
        return "—"
    return (
        f"mean {stats.mean:.2f}, median {_ms(stats.median, stats.median_ci)}, p90 {stats.p90:.2f}, "
        f"p99 {_ms(stats.p99, stats.p99_ci)}"
    )


def rows(section: Serving) -> list[tuple[str, str]]:
    """The headline table: each figure under the three definitions, side by side, then each
    turn's, how output tokens were counted and how late requests went out; a rate search's
    points and the rate it found last."""
    ours = section.figures()
    out: list[tuple[str, str]] = [
        ("requests", f"{section.requests or 0} sent, {ours.completed or 0} completed"),
        ("error rate", "—" if ours.error_rate is None else f"{ours.error_rate:.1%}"),  # none sent
    ]
    if section.partial:
        out.append(("partial", "yes: interrupted, figures cover what was measured"))
    for name, title in DEFINITION_TITLES.items():
        out += _definition_rows(section, name, title)
    out += [_turn_row(turn) for turn in section.per_turn or []]
    sources = section.token_count_sources
    if sources:
        out.append(("output tokens counted by", ", ".join(f"{k} x{v}" for k, v in sources.items())))
    lateness = section.send_lateness_ms
    if lateness:
        out.append(("send lateness ms", f"median {lateness.median:.3f}, p99 {lateness.p99:.3f}"))
    if section.search is not None:
        out += search_rows(section.search)
    return out


def _definition_rows(section: Serving, name: str, title: str) -> list[tuple[str, str]]:
    """One definition's throughputs, latencies and goodput, each row labelled with its title."""
    m = section.figures(name)
    rate, tokens = m.request_throughput, m.output_token_throughput
    out = [
        (f"[{title}] requests/s", "—" if rate is None else f"{rate:.3f}"),
        (f"[{title}] output tokens/s", "—" if tokens is None else f"{tokens:.1f}"),
    ]
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        label = metric.removesuffix("_ms").upper()
        label += " (per chunk)" if (name, metric) == ("vllm", "itl_ms") else ""
        out.append((f"[{title}] {label} ms", _described(m.latency(metric))))
    if m.goodput is not None:
        out.append((f"[{title}] goodput req/s", f"{m.goodput:.3f} ({m.slo_attainment or 0:.1%} met the SLO)"))
    return out


def _turn_row(turn: TurnFigures) -> tuple[str, str]:
    """The context a turn carries, and its TTFT."""
    ttft, context = turn.ttft_ms_median, turn.prompt_tokens_median
    grown = "" if context is None else f"{context:g} prompt tokens: "
    median = "—" if ttft is None else f"{ttft:.2f} ms"
    return (
        f"turn {(turn.turn or 0) + 1}",
        f"{grown}TTFT median {median}, {turn.completed} of {turn.requests} completed",
    )


def search_rows(search: RateSearch) -> list[tuple[str, str]]:
    """One row a point (a cut one says so, with no figures), the rate found and why the search
    stopped. Reads searches stored before points had percentiles (each point's ``p99``) too."""
    out = [(f"{p.rate:.4g} req/s", _point(p)) for p in search.points]
    found = search.max_rate
    found_text = "none found" if found is None else f"{found:.4g} req/s"
    if search.stopped is not None and search.spent_s is not None:
        found_text += f" (stopped: {search.stopped}, {search.spent_s:.0f} s)"
    out.append(("max rate meeting the SLO", found_text))
    return out


def _point(point: SearchPoint) -> str:
    if point.partial:
        return f"cut ({point.cut}): partial, not measured; {point.completed or 0} requests done"
    if point.latency_ms is None:  # a search stored with p99s only
        return f"{point.verdict}: " + ", ".join(f"p99 {k} {v:.2f}" for k, v in (point.p99 or {}).items())

    def ms(value: float | None) -> str:
        return "∞" if value is None else f"{value:.2f}"

    figures = ", ".join(f"{k} {ms(f.quantile)} ms (bound {ms(f.upper)})" for k, f in point.latency_ms.items())
    achieved = point.request_throughput
    done = "" if achieved is None else f"; {achieved:.4g} req/s achieved"
    return f"{point.verdict}: {figures}{done}"


CURVE_HEADER = ("load", "req/s", "out tok/s", "TTFT p50/p99", "TPOT p50/p99", "E2E p50/p99", "SLO", "run")


def curve_table(curve: list[CurvePoint], run_ids: list[str]) -> tuple[tuple[str, ...], list[list[str]]]:
    """A sweep's curve, one row a point: its load, the requests/s and output tokens/s achieved,
    TTFT, TPOT and E2E p50/p99 in ms (flowrate's definitions; whole ms from 100), its --slo
    verdict, its run."""

    def number(value: float | None, digits: int) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    def ms(value: float | None) -> str:  # whole milliseconds from 100 on: the table stays narrow
        return number(value, 0 if value is not None and value >= 100 else 1)

    rows = []
    for point, run_id in zip(curve, run_ids, strict=True):
        spans = [f"{ms(p.p50)} / {ms(p.p99)}" for p in point.latency_ms.values()]
        verdict = f"cut ({point.cut}): partial" if point.partial else point.verdict or "—"
        rows.append(
            [
                point.load.label,
                number(point.request_throughput, 3),
                number(point.output_token_throughput, 1),
                *spans,
                verdict,
                run_id,
            ]
        )
    return CURVE_HEADER, rows
