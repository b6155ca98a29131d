"""`flowrate run --to-solution … --scaling STUDY --prices FILE`, end to end on a CPU: the run priced by
its machine's entry, projected to a stored study's sizes; the mistakes refused before any run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from flowrate.results.schema import Result
from flowrate.results.sections import Distributed
from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter

TINY = ("-p", "fc_mnist", "--size", "debug", "--batch-size", "2", "--preheat", "1", "--steps", "4")


def test_a_run_priced_from_the_file_projects_its_job_to_a_stored_studys_sizes(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path
) -> None:
    db, out, prices = tmp_path / "runs.db", tmp_path / "run.json", tmp_path / "prices.toml"
    prices.write_text('[[machine]]\ndevice_name = "no such device"\nprice_per_hour = 1.0\n')
    refusals = [
        (("--prices", str(tmp_path / "none.toml")), "error: --prices: cannot read"),
        (("--to-solution", "1e6samples", "--scaling", "nosuch"), "error: --scaling: 'nosuch' names no"),
        (("--scaling", "nosuch"), "error: --scaling: projects a job's time to solution"),
        (("--to-solution", "2epochs"), "error: --to-solution: epochs count the samples of a --data set"),
    ]
    for flags, says in refusals:  # before any run: nothing is recorded
        done = run_cli("run", *TINY, *flags, "--store", str(db))
        assert (done.code, done.stderr.splitlines()[-1][: len(says)]) == (2, says)

    # the study: a measured 1-process run, and a 2-process point at 1.8 times its rate
    assert run_cli("run", *TINY, "--store", str(db), "-t", "scaling:demo").code == 0
    with Store(db) as store:
        one = store.runs(RunFilter(tag="scaling:demo"))[0].result
        two = dataclasses.replace(
            one,
            run_id="b2" + one.run_id[2:],
            summary=dataclasses.replace(one.summary, samples_per_sec=1.8 * one.summary.samples_per_sec),
            distributed=Distributed(world_size=2, batch_size_per_rank=one.batch_size),
        )
        store.add(two, ("scaling:demo",))
    # the prices file names this machine by its host in its second entry
    host = one.environment.hostname
    prices.write_text(prices.read_text() + f'[[machine]]\nhostname = "{host}"\nprice_per_hour = 3.6\n')

    done = run_cli(
        "run", *TINY, "--to-solution", "1e6samples", "--scaling", "demo", "--prices", str(prices),
        "--store", str(db), "-o", str(out),
    )  # fmt: skip
    assert done.code == 0, done.stderr
    result = Result.load(out)
    assert result.cost is not None and result.cost.price_per_hour == 3.6
    assert result.cost.prices_from == f"{prices} machine 2 (hostname={host!r})"
    solution = result.solution
    assert solution is not None and solution.seconds is not None and solution.dollars is not None
    assert [(p.devices, p.run_id) for p in solution.devices] == [(1, one.run_id), (2, two.run_id)]
    assert solution.devices[1].efficiency == pytest.approx(0.9)
    # at 2 devices, 0.9 efficient, priced per device: the job's cost here over 0.9
    assert solution.devices[1].dollars == pytest.approx(solution.dollars / 0.9)
    assert solution.devices_rest_on.startswith("scaling study demo: efficiencies against its 1-device run")
    assert "at N devices  1 device: " in done.stderr and "2 devices: " in done.stderr
