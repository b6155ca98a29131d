"""What a results store already holds of a sweep, read without creating or changing anything:
what a dry run lists beside the points it would run, and the runs a finished sweep recorded."""

from __future__ import annotations

from flowrate.campaigns.sweep.name import check_name
from flowrate.campaigns.sweep.spec import SweepSpec
from flowrate.results.store import Store, StoredRun, SweepPoint, store_path
from flowrate.results.store_filter import RunFilter


def recorded_points(spec: SweepSpec, store: str | None) -> dict[str, SweepPoint]:
    """The points of ``spec`` the store at ``store`` has recorded, by key (none when there is no
    store yet); a name the store holds for another grid is refused as running the sweep would."""
    if not store_path(store).exists():
        return {}
    with Store(store, create=False) as opened:
        check_name(spec, opened.sweeps())
        return opened.sweep_points(spec.sweep_id)


def sweep_runs(sweep_id: str, store: str | None) -> list[StoredRun]:
    """Every run the store at ``store`` holds of the sweep ``sweep_id``, resumed ones too."""
    with Store(store, create=False) as opened:
        return opened.runs(RunFilter(sweep=sweep_id))
