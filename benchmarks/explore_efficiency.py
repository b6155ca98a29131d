"""How much of a grid's frontier `flowrate explore` finds for a quarter of the grid's runs, measured
deterministically from a recorded grid table (benchmarks/record_grid.py writes it).

Each evaluated point's figures are drawn from the table's recorded mean and spread, seeded
(explore_table.py). The search is modelled at a user's full length: full runs
last --full-duration (flowrate run's default, 10 s) with flowrate run's default preheat and
minimum steps; successive halving's rungs are the ladder `flowrate explore --duration FULL
--min-duration RECORDED` builds (Fidelity.ladder), its shortest rung the table's recorded
duration, the only length whose spread was measured. A configuration goes on through its rungs
in one process, as `flowrate explore` runs these objectives (flowrate.campaigns.rungs.ladder.Continuation): it
costs the point's own start-up (its recorded wall time less its recorded steps) and a full run's
preheat steps once, then the timed steps up to the last rung it reaches (each rung's duration or
minimum steps, whichever is longer); every rung draws the recorded spread (an upper bound for
the longer rungs). A search is scored by
the hypervolume of the points it measured at full length, at their recorded means, as a fraction
of the whole grid's (reference point: each objective's worst grid value, 10% of the range further).

    python benchmarks/explore_efficiency.py                       # the recorded table, 20 seeds
    python benchmarks/explore_efficiency.py --table grid.json --seeds 5 --full-duration 30

Three comparisons, each over the seeds:
  1. explore (budget: 25% of the grid's points, in runs) reaches >= 95% of the grid's hypervolume
     in >= 90% of the seeds (18 of 20);
  2. explore beats random search at the same budget on median hypervolume;
  3. successive halving reaches the hypervolume the full-length search reached in <= 60% of the
     full-length search's compute time (median over seeds of the ratio; also printed: the ratio to
     the compute at which the full-length search itself first reached it, a stricter reading).

Printed with them, what bounds the third: the lowest rung's cost over a full run's (median over
the grid's points), and an oracle's ratio: successive halving looking at exactly the
configurations the full search did, each to the lowest rung, and letting exactly those on their
frontier (at their recorded means) go on to full length: what no promotion rule beats over those
configurations, the frontier having to run at full length.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from explore_table import (
    GridTable,
    Scorer,
    load_table,
    search,
    search_curve,
    time_to,
    trace,
)
from flowrate.campaigns.explore.objectives import Objective, parse_objectives
from flowrate.campaigns.explore.plan import DONE, Budget, Evaluated, sampler_kind
from flowrate.campaigns.rungs.ladder import Fidelity, Measured, first_front
from flowrate.config import RunConfig
from record import Figure, Target, record  # beside this script

# the current launcher (forked processes) on the VM's usual host; beside it, the others (--table)
TABLE = Path(__file__).parent / "data" / "grid_transformer_cpu_amd_forked.json"
OBJECTIVES = ("samples_per_sec:max", "peak_memory_bytes:min")
TARGET = 0.95


@dataclass(frozen=True)
class Efficiency:
    explore: list[float]  # final hypervolume fraction per seed
    random: list[float]
    ratios: list[float]  # successive halving's time to the full search's hypervolume, over the full's time
    strict: list[float]  # the same time over the full search's own time to its final hypervolume
    budget: int
    rung_cost: float  # median over the grid's points of the lowest rung's cost over a full run's
    oracle: list[float]  # per seed, an oracle's compute over the full search's (module docstring)

    @property
    def reached(self) -> int:
        return sum(h >= TARGET for h in self.explore)


def ladder(table: GridTable, eta: int = Fidelity.eta, z: float = Fidelity.z) -> Fidelity:
    """The rungs successive halving runs: the table's recorded duration up to a full run's, as
    `flowrate explore --duration FULL --min-duration RECORDED` builds them."""
    return Fidelity.ladder(table.full_s, table.duration_s, eta, z)


def measure(
    table: GridTable,
    objectives: tuple[Objective, ...],
    seeds: range,
    fraction: float = 0.25,
    eta: int = Fidelity.eta,
    with_halving: bool = True,
    z: float = Fidelity.z,
) -> Efficiency:
    """The three comparisons' figures over ``seeds`` (module docstring)."""
    budget = max(1, round(fraction * len(table.points)))
    fidelity = ladder(table, eta, z)
    explore, random, ratios, strict, oracle = [], [], [], [], []
    for seed in seeds:
        looked = search(table, objectives, seed=seed, budget=Budget(runs=budget))
        sampler = sampler_kind(table.space(), Budget(runs=budget))
        full = trace(Scorer.of(table, objectives), looked, 0, table.space().base)
        explore.append(full[-1][1])
        random.append(
            search_curve(table, objectives, seed=seed, budget=Budget(runs=budget), sampler="random")[-1][1]
        )
        if not with_halving:
            continue
        cost = full[-1][0]  # successive halving gets twice the full search's compute to get there
        halving = search_curve(  # the full search's sampler, though its budget is in seconds
            table, objectives, seed=seed, budget=Budget(seconds=2 * cost), fidelity=fidelity, sampler=sampler
        )
        ratios.append(time_to(halving, full[-1][1]) / cost)
        oracle.append(_oracle(table, objectives, looked, fidelity.durations[0]) / cost)
        strict.append(time_to(halving, full[-1][1]) / time_to(full, full[-1][1]))
    shortest = fidelity.durations[0]
    done = [p for p in table.points.values() if p.status == "done"]
    rung_cost = statistics.median(
        table.cost(p, shortest, goes_on=True) / table.cost(p, table.full_s) for p in done
    )
    return Efficiency(explore, random, ratios, strict, budget, rung_cost, oracle)


def _oracle(
    table: GridTable, objectives: tuple[Objective, ...], looked: list[Evaluated], shortest: float
) -> float:
    """The compute of an oracle's successive halving over the configurations ``looked`` at
    (module docstring): each to the shortest rung, their frontier on to full length."""
    base = table.space().base
    points = [table.get({**base, **e.params}) for e in looked]
    done = [p for p in points if p.status == DONE]
    gains = [tuple(p.figures[o.name][0] * (1 if o.maximize else -1) for o in objectives) for p in done]
    front = first_front([Measured(str(i), g, (0.0,) * len(g)) for i, g in enumerate(gains)])
    spent = sum(table.cost(p, shortest, goes_on=True) for p in points)
    return spent + sum(
        table.timed(done[int(m.key)], table.full_s) - table.timed(done[int(m.key)], shortest) for m in front
    )


def report(table: GridTable, result: Efficiency, seeds: int, eta: int = Fidelity.eta) -> bool:
    print(f"table: {len(table.points)} points, {table.source}; budget {result.budget} runs (25%)")
    rungs = ", ".join(f"{d:.3g}" for d in ladder(table, eta).durations)
    print(f"full length {table.full_s:g} s (recorded at {table.duration_s:g} s); halving's rungs: {rungs} s")
    print(f"explore hypervolume fraction per seed: {' '.join(f'{h:.3f}' for h in result.explore)}")
    print(f"random  hypervolume fraction per seed: {' '.join(f'{h:.3f}' for h in result.random)}")
    ratios = " ".join(f"{r:.2f}" for r in result.ratios) or "not measured"
    print(f"successive halving / full-length compute to the same hypervolume: {ratios}")
    if result.strict:
        strict = " ".join(f"{r:.2f}" for r in result.strict)
        print(f"  over the full search's own compute to that hypervolume (stricter): {strict}")
        print(
            f"  the lowest rung costs {result.rung_cost:.2f} of a full run (median over the grid): <= 0.60 "
            f"needs the frontier from <= {0.6 / result.rung_cost:.0%} of the full search's configurations"
        )
        floor = " ".join(f"{r:.2f}" for r in result.oracle)
        print(f"  oracle (the full search's configurations, only their frontier promoted): {floor}")
        print(f"  median oracle ratio {statistics.median(result.oracle):.2f}: no rule beats it over those")
    explore, random = statistics.median(result.explore), statistics.median(result.random)
    halving = statistics.median(result.ratios) if result.ratios else math.nan
    need = math.ceil(0.9 * seeds)
    checks = [
        (
            f"explore >= {TARGET:.0%} of the grid hypervolume in {result.reached}/{seeds} seeds, need {need}",
            result.reached >= need,
        ),
        (
            f"median hypervolume: explore {explore:.3f}, random {random:.3f}",
            explore > random,
        ),
    ]
    if result.ratios:
        checks.append(
            (f"successive halving's median compute ratio {halving:.2f} (need <= 0.60)", halving <= 0.60)
        )
    for line, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {line}")
    return all(ok for _, ok in checks)


def figures(result: Efficiency, seeds: int) -> list[Figure]:
    """The three comparisons as figures for the record, each against its target."""
    explore, random = statistics.median(result.explore), statistics.median(result.random)
    found = [
        Figure(
            f"seeds where explore reaches {TARGET:.0%} of the grid's hypervolume",
            result.reached,
            f"of {seeds}",
            Target(">=", math.ceil(0.9 * seeds)),
            f"budget {result.budget} runs (25% of the grid)",
        ),
        Figure("explore's median hypervolume fraction", round(explore, 4), "fraction"),
        Figure("random search's median hypervolume fraction", round(random, 4), "fraction"),
        Figure("explore - random search, median", round(explore - random, 4), "fraction", Target(">", 0)),
    ]
    if result.ratios:
        halving = round(statistics.median(result.ratios), 4)
        note = "successive halving's compute over the full-length search's, to the same hypervolume"
        name = "successive halving's median compute ratio"
        found.append(Figure(name, halving, "ratio", Target("<=", 0.6), note))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--eta",
        type=int,
        default=Fidelity.eta,
        help="rung ratio (default: flowrate explore's); 9 from 1 s to 10 s leaves two rungs",
    )
    parser.add_argument(
        "--z",
        type=float,
        default=Fidelity.z,
        help="standard errors a promotion's comparison allows for (default: flowrate explore's)",
    )
    parser.add_argument(
        "--full-duration",
        type=float,
        default=RunConfig.duration_s,
        help="a full run's duration in seconds (default: flowrate run's); the shortest rung is the table's",
    )
    args = parser.parse_args()
    if not args.table.exists():
        print(f"no grid table at {args.table}: record one with benchmarks/record_grid.py", file=sys.stderr)
        return 2
    table = dataclasses.replace(load_table(args.table), full_s=args.full_duration)
    result = measure(table, parse_objectives(OBJECTIVES), range(args.seeds), eta=args.eta, z=args.z)
    passed = report(table, result, args.seeds, args.eta)
    shape = f"{table.source}; eta {args.eta}, z {args.z}"
    record("explore_efficiency", figures(result, args.seeds), note=shape)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
