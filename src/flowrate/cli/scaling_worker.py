"""The worker torchrun starts on every rank of a `flowrate scaling` size:
`python -m flowrate.cli.scaling_worker CONFIG.json RESULT.json`.

Rank 0 writes the merged Result to RESULT.json; a mistake or a failure is one line on stderr and
an exit code, as `flowrate run` gives them (flowrate/cli/boundary.py).
"""

from __future__ import annotations

import sys


def worker(config_file: str, result_file: str) -> None:
    """One rank of a size: run the configuration; rank 0 writes the merged Result."""
    import json
    from pathlib import Path

    from flowrate.config import RunConfig
    from flowrate.execution.launch import is_primary
    from flowrate.harness.api import run_config

    result = run_config(RunConfig.from_dict(json.loads(Path(config_file).read_text())))
    if is_primary():
        result.save(result_file)


if __name__ == "__main__":
    from flowrate.cli.boundary import answer

    answer(lambda: worker(sys.argv[1], sys.argv[2]))
