"""What a results store already holds of a sweep, read without creating or changing anything:
what a dry run lists beside the points it would run."""

from __future__ import annotations

from flowrate.campaigns.sweep.name import check_name
from flowrate.campaigns.sweep.spec import SweepSpec
from flowrate.results.store import Store, SweepPoint, store_path


def recorded_points(spec: SweepSpec, store: str | None) -> dict[str, SweepPoint]:
    """The points of ``spec`` the store at ``store`` has recorded, by key (none when there is no
    store yet); a name the store holds for another grid is refused as running the sweep would."""
    if not store_path(store).exists():
        return {}
    with Store(store, create=False) as opened:
        check_name(spec, opened.sweeps())
        return opened.sweep_points(spec.sweep_id)
