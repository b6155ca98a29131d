"""The worker torchrun starts on every rank of a `flowrate scaling` size:
`python -m flowrate.cli.scaling_worker CONFIG.json RESULT.json`.

Rank 0 writes the merged Result to RESULT.json; a mistake or a failure is one line on stderr and
an exit code, as `flowrate run` gives them.
"""

from __future__ import annotations

import sys


def worker(config_file: str, result_file: str) -> int:
    """One rank of a size: run the configuration; rank 0 writes the merged Result (exit codes as
    `flowrate run`'s)."""
    import json
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.main import EXIT_FAILED, EXIT_USAGE, flag_name
    from flowrate.config import RunConfig
    from flowrate.errors import ConfigError, FlowrateError
    from flowrate.execution.distributed import is_primary
    from flowrate.harness.api import run_config

    try:
        result = run_config(RunConfig.from_dict(json.loads(Path(config_file).read_text())))
    except ConfigError as mistake:
        console.error(f"{flag_name(mistake.field)}: {mistake.message}")
        return EXIT_USAGE
    except FlowrateError as failure:
        console.error(str(failure))
        return EXIT_FAILED
    if is_primary():
        result.save(result_file)
    return 0


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1], sys.argv[2]))
