"""The harness: a run from its config to its Result, and a session around a user's own loop.

``api`` (benchmark, run_config) hands each process's run to ``run``, which builds what it
measures with ``prepare`` (model, executor, batches), times it with flowrate.measure.loop, records
each interval with ``recorder`` and assembles the Result (flowrate.results.assemble). ``session``
measures the user's own loop with the same pieces.
"""
