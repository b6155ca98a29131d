"""GPU estimates checked on paper: flowrate's estimate beside published per-GPU measurements.

For each case of flowrate.estimate.published (a published figure with the configuration that
reproduces it and its citation), the samples/s `flowrate estimate --target` gives for the same
configuration, the ratio estimated ÷ published, the MFU each figure implies (model FLOPs per sample
x samples/s ÷ the dense datasheet peak), and the estimate's split of the step (compute-bound,
memory-bound, launch overhead). Nothing is measured here: it prices configurations on the meta
device, so it gives the same table on any machine (about a minute on 2 cores).

    python benchmarks/estimate_published.py
    python benchmarks/estimate_published.py --commands     # also each case's flowrate command
    python benchmarks/estimate_published.py --json published.json
"""

from __future__ import annotations

import argparse
import json
import statistics

from flowrate.estimate.published import CASES, RECORDED, WITHIN, Evaluation, evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commands", action="store_true", help="print each case's flowrate command")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    header = (
        f"{'case':42} {'published':>10} {'estimated':>10} {'ratio':>6} {'pinned':>6} "
        f"{'pub MFU':>8} {'est MFU':>8}  {'compute/memory/overhead':>23}"
    )
    print(header)
    rows: list[Evaluation] = []
    for case in CASES:
        row = evaluate(case)
        rows.append(row)
        mark = "" if abs(row.ratio - 1) <= WITHIN else "  miss"
        split = f"{row.compute_share:.0%}/{row.memory_share:.0%}/{row.overhead_share:.0%}"
        print(
            f"{case.name:42} {case.published:>10.1f} {row.estimated:>10.1f} {row.ratio:>6.2f} "
            f"{RECORDED.get(case.name, float('nan')):>6.2f} {row.published_mfu:>8.1%} "
            f"{row.estimated_mfu:>8.1%}  {split:>23}{mark}",
            flush=True,
        )
        if args.commands:
            print(f"    {case.command()}")
    within = sum(abs(r.ratio - 1) <= WITHIN for r in rows)
    errors = [abs(r.ratio - 1) for r in rows]
    print(
        f"{within} of {len(rows)} within ±{WITHIN:.0%}; median |error| {statistics.median(errors):.0%}, "
        f"median ratio {statistics.median(r.ratio for r in rows):.2f} (estimated ÷ published)"
    )
    print("\nsamples/s per GPU; published figures, as printed:")
    for case in CASES:
        print(f"  {case.name}: {case.printed}, {case.hardware}; {case.citation}, {case.where} ({case.date})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump([_as_dict(r) for r in rows], out, indent=2)


def _as_dict(row: Evaluation) -> dict[str, object]:
    c = row.case
    return {
        "case": c.name,
        "published": c.published,
        "estimated": row.estimated,
        "ratio": row.ratio,
        "published_mfu": row.published_mfu,
        "estimated_mfu": row.estimated_mfu,
        "command": c.command(),
        "citation": c.citation,
        "where": c.where,
        "miss": c.miss or None,
    }


if __name__ == "__main__":
    main()
