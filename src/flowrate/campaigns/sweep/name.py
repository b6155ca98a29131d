"""One name, one sweep: a sweep's name reused with other options is refused, not merged.

A sweep's identity is the hash of its base, grid and name (SweepSpec.sweep_id); its name tags
its runs (sweep:NAME) and `runs --sweep NAME` selects by it. Two sweeps under one name would
list both grids' points as one sweep, so a name the store holds for other options is a mistake
(exit 2) that says what differs; the same options under the same name resume the sweep.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from flowrate.campaigns.sweep.spec import SweepSpec
from flowrate.errors import ConfigError

NOTHING = "—"


def check_name(spec: SweepSpec, recorded: Iterable[Mapping[str, Any]]) -> None:
    """Refuse ``spec`` when the store's sweeps (Store.sweeps()) hold its name for other options."""
    namesakes = [s for s in recorded if s["name"] == spec.label]
    if not namesakes or any(s["sweep_id"] == spec.sweep_id for s in namesakes):
        return  # a new name, or this very sweep again: a resume
    before, now = _difference(namesakes[0]["spec"], spec.to_dict())  # the newest namesake
    raise ConfigError(
        "name",
        f"sweep {spec.label} was recorded with a different grid (recorded: {before}; now: {now}); "
        "use a new --name or the same grid to resume",
    )


def _difference(recorded: Mapping[str, Any], given: Mapping[str, Any]) -> tuple[str, str]:
    """The options that differ, as each side gives them: 'batch_size=1,2 precision=fp32'."""
    old, new = _options(recorded), _options(given)
    keys = [*new, *(k for k in old if k not in new)]
    differ = [k for k in keys if _canonical(old.get(k)) != _canonical(new.get(k))]
    if not differ:  # the ids differ in what these texts do not show (a value's type)
        differ = keys

    def side(options: Mapping[str, list[Any]]) -> str:
        shown = [f"{k}={','.join(str(v) for v in options[k])}" for k in differ if k in options]
        return " ".join(shown) or NOTHING

    return side(old), side(new)


def _options(spec: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Base and grid as key -> values (a base option has one), grid keys first."""
    grid = spec.get("grid") or {}
    base = spec.get("base") or {}
    return {**{k: list(v) for k, v in grid.items()}, **{k: [v] for k, v in base.items() if k not in grid}}


def _canonical(values: list[Any] | None) -> list[str] | None:
    """Values compared as the sweep id compares them: order aside."""
    return None if values is None else sorted(json.dumps(v) for v in values)
