"""How much of a grid's frontier `flowrate explore` finds for a quarter of the grid's runs, measured
deterministically from a recorded grid table (benchmarks/record_grid.py writes it).

Each evaluated point's figures are drawn from the table's recorded mean and spread, seeded
(flowrate.campaigns.explore_table: a run costs the point's own start-up, its preheat steps and
its timed steps, the duration or the minimum steps, whichever is longer; a short rung runs fewer
steps, as `flowrate explore` runs it, and its spread is scaled up by sqrt(full/short timed time)).
A search is scored by
the hypervolume of the points it measured at full length, at their recorded means, as a fraction
of the whole grid's (reference point: each objective's worst grid value, 10% of the range further).

    python benchmarks/explore_efficiency.py                       # the recorded table, 20 seeds
    python benchmarks/explore_efficiency.py --table grid.json --seeds 5

Three comparisons, each over the seeds:
  1. explore (budget: 25% of the grid's points, in runs) reaches >= 95% of the grid's hypervolume
     in >= 90% of the seeds (18 of 20);
  2. explore beats random search at the same budget on median hypervolume;
  3. successive halving reaches the hypervolume the full-length search reached in <= 60% of the
     full-length search's compute time (median over seeds of the ratio; also printed: the ratio to
     the compute at which the full-length search itself first reached it, a stricter reading).

Printed with them, what bounds the third: the lowest rung's cost over a full run's (median over
the grid's points). Successive halving spends at least that on every configuration it looks at,
so to reach the full search's hypervolume in 60% of its compute it must look at no more than
0.6/that of the configurations the full search did, before any promotion is paid for.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from flowrate.campaigns.explore_fidelity import Fidelity
from flowrate.campaigns.explore_objectives import Objective, parse_objectives
from flowrate.campaigns.explore_plan import Budget
from flowrate.campaigns.explore_table import GridTable, load_table, search_curve, time_to

TABLE = Path(__file__).parent / "data" / "grid_transformer_cpu.json"
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

    @property
    def reached(self) -> int:
        return sum(h >= TARGET for h in self.explore)


def measure(
    table: GridTable,
    objectives: tuple[Objective, ...],
    seeds: range,
    fraction: float = 0.25,
    min_fraction: float = 1 / 3,
    eta: int = 3,
    with_halving: bool = True,
) -> Efficiency:
    """The three comparisons' figures over ``seeds`` (module docstring)."""
    budget = max(1, round(fraction * len(table.points)))
    fidelity = Fidelity.ladder(table.duration_s, table.duration_s * min_fraction, eta)
    explore, random, ratios, strict = [], [], [], []
    for seed in seeds:
        full = search_curve(table, objectives, seed=seed, budget=Budget(runs=budget))
        explore.append(full[-1][1])
        random.append(
            search_curve(table, objectives, seed=seed, budget=Budget(runs=budget), sampler="random")[-1][1]
        )
        if not with_halving:
            continue
        cost = full[-1][0]  # successive halving gets twice the full search's compute to get there
        halving = search_curve(
            table, objectives, seed=seed, budget=Budget(seconds=2 * cost), fidelity=fidelity
        )
        ratios.append(time_to(halving, full[-1][1]) / cost)
        strict.append(time_to(halving, full[-1][1]) / time_to(full, full[-1][1]))
    shortest = fidelity.durations[0]
    rung_cost = statistics.median(table.cost(p, shortest)[0] / p.wall_s for p in table.points.values())
    return Efficiency(explore, random, ratios, strict, budget, rung_cost)


def report(table: GridTable, result: Efficiency, seeds: int) -> bool:
    print(f"table: {len(table.points)} points, {table.source}; budget {result.budget} runs (25%)")
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--min-fraction", type=float, default=1 / 3, help="shortest rung, a fraction of the duration"
    )
    args = parser.parse_args()
    if not args.table.exists():
        print(f"no grid table at {args.table}: record one with benchmarks/record_grid.py", file=sys.stderr)
        return 2
    table = load_table(args.table)
    result = measure(table, parse_objectives(OBJECTIVES), range(args.seeds), min_fraction=args.min_fraction)
    return 0 if report(table, result, args.seeds) else 1


if __name__ == "__main__":
    sys.exit(main())
