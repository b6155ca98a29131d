"""The noise model: how much samples/s varies between runs of one configuration on one machine.

pyperf and asv learn a benchmark's noise from its past runs; so does flowrate. Runs are grouped by
what must match for their numbers to be draws of one quantity: the problem (name, size, mode,
shape), the configuration (batch size, precision, execution, optimizer, device, threads) and
the machine (host name, device, CPU model, thread count). Each process — a run, or each repeat of
a --repeat result — is one value: its median interval samples/s (a serving run's: the requests/s
it completed over the whole run, since completions counted in windows are too lumpy to take a
median of). Records are grouped by kind and workload too (flowrate.results.identity): serving
runs at different loads are different configurations. Per group:

- between-run CV: the spread of those values relative to their mean, pooled over the sessions
  and commits the runs were made in. Runs of different code differ for a reason: a step is not
  noise. Runs of one session — one `compare --run` (its compare:ID tags) or one --repeat result —
  ran back to back, interleaved; those of different sessions also differ by the machine's drift
  between them (hours apart, other load, a re-booted VM), which an interleaved comparison cancels
  and so must not count as its noise (measured on the development VM, 40 + 40 comparisons:
  3.7% for fc_mnist and 1.9% for transformer/mini within comparisons, against 7.3% and 3.9%
  pooled across a day's comparisons of one commit). Runs in no session are grouped by
  commit alone; runs without a commit are one group, so a store of changing code without commit
  metadata overstates the noise — fewer differences called, never more;
- within-run CV: the mean of each run's own interval CV (how steady a run is inside);
- intraclass correlation: the share of one interval's variance that is the run's offset,
  σ_b² / (σ_b² + σ_w²), with σ_w² the mean within-run variance and σ_b² the between-run variance
  of the run values less what their own sampling explains (Σ σ_w,i²/m_i / k), floored at 0 —
  the one-way random-effects estimate, on values relative to the group mean.

compare uses a group's between-run CV when a side has too few runs to show its own
(flowrate.results.verdict), pooling A's and B's groups and leaving out the compared runs; from a
store it reads the newest HISTORY_RUNS runs that may share the configuration, which speak for the
machine as it is now and are read in a time that does not grow with the store.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowrate.results.compare import History, configuration, problem_identity
from flowrate.results.environment import environment_fingerprint
from flowrate.results.identity import kind_of
from flowrate.results.schema import Result
from flowrate.results.sections import Kind

if TYPE_CHECKING:
    from flowrate.results.store import StoredRun

MIN_HISTORY_RUNS = 3  # fewer earlier runs say too little about the spread to stand in for it
HISTORY_RUNS = 200  # a store's newest runs of a configuration that history_in_store reads, at most


@dataclass(frozen=True)
class ProcessPoint:
    """One process's samples/s: its median interval rate and how steady its intervals were."""

    run_id: str
    value: float
    within_cv: float | None
    intervals: int
    created_at: str
    commit: str | None  # the flowrate checkout's commit, where the run recorded one
    dirty: bool | None
    session: str | None = None  # the back-to-back runs it belongs to (session_of), if any


COMPARE_TAG = "compare:"  # `compare --run` tags its runs compare:ID:A and compare:ID:B


def _compare_tag(tags: Iterable[str]) -> tuple[str, str] | None:
    """(compare:ID, side) from a stored run's compare:ID:SIDE tag, if it has one."""
    for tag in tags:
        if tag.startswith(COMPARE_TAG) and tag.count(":") == 2:
            session, _, side = tag.rpartition(":")
            return session, side
    return None


def session_of(tags: Iterable[str]) -> str | None:
    """The interleaved comparison a stored run was made in (compare:ID, from its tags), if any."""
    found = _compare_tag(tags)
    return None if found is None else found[0]


def side_of(tags: Iterable[str]) -> str | None:
    """The side (A or B) a stored run ran as in an interleaved comparison (compare:ID:A), if any."""
    found = _compare_tag(tags)
    return found[1] if found is not None and found[1] in ("A", "B") else None


def process_points(result: Result, session: str | None = None) -> list[ProcessPoint]:
    """The processes a result stands for: itself, or each repeat of a --repeat result (whose
    repeats are a session of their own unless ``session`` names the one it was made in)."""
    software = result.environment.flowrate
    commit = software.commit if software else None
    dirty = software.dirty if software else None

    def point(run_id: str, value: Any, cv: Any, intervals: Any) -> ProcessPoint | None:
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            return None
        within = float(cv) if isinstance(cv, int | float) and math.isfinite(cv) else None
        count = intervals if isinstance(intervals, int) else 0
        return ProcessPoint(run_id, float(value), within, count, result.created_at, commit, dirty, session)

    entries = result.repeat.runs if result.repeat is not None else []
    if entries and session is None:
        session = f"repeat:{result.run_id}"
    made = [point(e.run_id or result.run_id, e.median_samples_per_sec, e.cv, e.intervals) for e in entries]
    if not entries:
        s = result.summary
        if kind_of(result) is Kind.SERVE:  # completions in windows are lumpy: the run's request rate
            made = [point(result.run_id, s.samples_per_sec, None, s.intervals)]
        else:
            made = [point(result.run_id, s.median_samples_per_sec, s.cv, s.intervals)]
    return [p for p in made if p is not None]


def machine(result: Result) -> dict[str, Any]:
    """What identifies the machine a run ran on (software versions are not the machine)."""
    fingerprint = environment_fingerprint(result.environment)
    return {
        "hostname": result.environment.hostname,
        "device_name": fingerprint["device_name"],
        "cpu_model": fingerprint["cpu_model"],
        "num_threads": fingerprint["num_threads"],
    }


def configuration_key(result: Result) -> str:
    """Runs with equal keys measure one quantity on one machine: their spread is noise."""
    fields = {**problem_identity(result), **configuration(result), **machine(result)}
    return json.dumps(fields, sort_keys=True, default=str)


@dataclass(frozen=True)
class NoiseRow:
    """The noise of one configuration on one machine."""

    key: str  # configuration_key
    problem: dict[str, Any]  # problem_identity
    configuration: dict[str, Any]
    machine: dict[str, Any]
    runs: int  # processes
    mean_samples_per_sec: float
    between_cv: float | None  # None with one process
    within_cv: float | None
    icc: float | None  # None without both a between and a within figure


def pooled_cv(points: Sequence[ProcessPoint]) -> tuple[float | None, int]:
    """(the between-run CV pooled over groups, its degrees of freedom): √(Σ (v/mean_g − 1)² /
    Σ (n_g − 1)) over the groups g of one commit (and dirty or not) and one session with two
    processes or more."""
    groups: dict[tuple[str | None, bool | None, str | None], list[float]] = {}
    for p in points:
        groups.setdefault((p.commit, p.dirty, p.session), []).append(p.value)
    squares, df = 0.0, 0
    for values in groups.values():
        if len(values) > 1:
            mean = statistics.fmean(values)
            squares += sum((v / mean - 1) ** 2 for v in values)
            df += len(values) - 1
    return (math.sqrt(squares / df) if df else None), df


def noise_of(points: Sequence[ProcessPoint]) -> tuple[float | None, float | None, float | None]:
    """(between-run CV, within-run CV, intraclass correlation) of one group's processes."""
    between, _ = pooled_cv(points)
    steady = [p for p in points if p.within_cv is not None]
    within = statistics.fmean(p.within_cv for p in steady if p.within_cv is not None) if steady else None
    if between is None or within is None:
        return between, within, None
    sampling = statistics.fmean(
        (p.within_cv or 0.0) ** 2 / p.intervals if p.intervals > 0 else 0.0 for p in steady
    )
    sigma_b2 = max(0.0, between**2 - sampling)
    sigma_w2 = statistics.fmean((p.within_cv or 0.0) ** 2 for p in steady)
    total = sigma_b2 + sigma_w2
    return between, within, sigma_b2 / total if total > 0 else None


def noise_table(results: Iterable[Result], sessions: Mapping[str, str] | None = None) -> list[NoiseRow]:
    """One row per configuration on a machine, most runs first; ``sessions`` maps a run id to
    the session it was made in (session_of its tags)."""
    groups: dict[str, tuple[Result, list[ProcessPoint]]] = {}
    for result in results:
        key = configuration_key(result)
        session = (sessions or {}).get(result.run_id)
        groups.setdefault(key, (result, []))[1].extend(process_points(result, session))
    rows = []
    for key, (first, points) in groups.items():
        if not points:
            continue
        between, within, icc = noise_of(points)
        rows.append(
            NoiseRow(
                key=key,
                problem=problem_identity(first),
                configuration=configuration(first),
                machine=machine(first),
                runs=len(points),
                mean_samples_per_sec=statistics.fmean(p.value for p in points),
                between_cv=between,
                within_cv=within,
                icc=icc,
            )
        )
    return sorted(rows, key=lambda r: -r.runs)


def block_cv(runs: Iterable[tuple[str, str, float]]) -> tuple[float | None, int]:
    """The CV between a side's two runs in one A B B A block, pooled, and its degrees of freedom:
    the pure error of flowrate.results.blocks, √(Σ (log x₁ − log x₂)² / 2 / df), from ``runs`` in
    the order they ran as (session, side, value). Each session's runs of sides A and B, taken four
    at a time in order, are a block where they read A B B A (each gives 2 degrees of freedom);
    others are skipped. The machine's drift between blocks is not in it: it is the noise a paired
    test sees."""
    by_session: dict[str, list[tuple[str, float]]] = {}
    for session, side, value in runs:
        if side in ("A", "B") and math.isfinite(value) and value > 0:
            by_session.setdefault(session, []).append((side, value))
    squares, df = 0.0, 0
    for ordered in by_session.values():
        for start in range(0, len(ordered) - 3, 4):
            block = ordered[start : start + 4]
            if "".join(side for side, _ in block) != "ABBA":
                continue
            a1, b1, b2, a2 = (math.log(value) for _, value in block)
            squares += ((a1 - a2) ** 2 + (b1 - b2) ** 2) / 2
            df += 2
    return (math.sqrt(squares / df) if df else None), df


def history_for(
    results: Iterable[Result],
    sides: Sequence[Result],
    exclude: Iterable[str] = (),
    sessions: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> History | None:
    """The between-run noise the store knows for the configurations of ``sides`` (each side's
    first run), from ``results`` less the runs ``exclude`` names; None under MIN_HISTORY_RUNS.

    Configurations, commits and sessions (``sessions``: run id → session) are pooled on the
    relative scale (pooled_cv); ``runs`` is the
    pooled degrees of freedom + 1, so the verdict's degrees of freedom (runs − 1) are the pooled
    ones. ``labels`` (run id → the side it ran as in its session, side_of) give the blocks' CV of
    the sessions' A B B A blocks (block_cv), read in the order of ``results``, which is then the
    order they ran in (a record's created_at is to the second: too coarse to order by).
    """
    keys = {configuration_key(r) for r in sides}
    skip = set(exclude)
    groups: dict[str, list[ProcessPoint]] = {}
    ordered: list[tuple[str, str, float]] = []  # (session, side, value), in the order they ran
    for result in results:
        if result.run_id in skip or (key := configuration_key(result)) not in keys:
            continue
        session = (sessions or {}).get(result.run_id)
        points = [p for p in process_points(result, session) if p.run_id not in skip]
        groups.setdefault(key, []).extend(points)
        side = (labels or {}).get(result.run_id)
        if session is not None and side is not None and len(points) == 1:
            ordered.append((session, side, points[0].value))
    squares, df = 0.0, 0
    for points in groups.values():
        cv, n = pooled_cv(points)
        squares, df = squares + (cv or 0.0) ** 2 * n, df + n
    if df + 1 < MIN_HISTORY_RUNS:
        return None
    blocks, block_df = block_cv(ordered)
    return History(cv=math.sqrt(squares / df), runs=df + 1, block_cv=blocks, block_df=block_df)


def history_in_store(
    store: str | os.PathLike[str] | None, side_a: Sequence[Result], side_b: Sequence[Result]
) -> History | None:
    """history_for over the newest HISTORY_RUNS runs of ``store`` (None where it does not exist)
    that may share the sides' configuration (Store.newest_like), leaving out the compared runs:
    their own spread is counted once, by the verdict. Only those runs' records are read, so the
    time it takes does not grow with the store (every record read costs about a millisecond and a
    half, which a comparison within a budget pays out of its budget)."""
    from flowrate.results.store import Store, store_path

    if not store_path(store).exists():
        return None
    compared = {r.run_id for r in (*side_a, *side_b)}
    sides = [side_a[0], side_b[0]]
    with Store(store, create=False) as opened:
        newest = opened.newest_like(sides, HISTORY_RUNS + len(compared))
        runs = [run for run in newest if run.run_id not in compared][:HISTORY_RUNS][::-1]  # as they ran
        recorded = [run.result for run in runs]
    labels = {run.run_id: side for run in runs if (side := side_of(run.tags)) is not None}
    return history_for(recorded, sides, (), sessions_of(runs), labels)


def sessions_of(runs: Iterable[StoredRun]) -> dict[str, str]:
    """run id → session, for the stored runs made in one."""
    return {run.run_id: session for run in runs if (session := session_of(run.tags)) is not None}
