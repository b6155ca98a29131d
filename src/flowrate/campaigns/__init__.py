"""Campaigns: many runs, each in a fresh process, one subpackage per feature.

- ``process``: one job (a run, a check, a generation) in a fresh process; where a batch of them
  runs: one after another here, or as Slurm jobs.
- ``recorded_run``: `flowrate run` once its flags are read: the run (or its repeats), a stored
  survey's MFU, a --scaling projection, the record and MLflow, in order.
- ``repeat``: `flowrate run --repeat N`, combined into one Result.
- ``sweep``: a grid of configurations, planned, run and resumed.
- ``explore``: a search of a configuration space for its frontier, through Optuna.
- ``rungs``: multi-fidelity: the rungs of run length, who is promoted up them, and a run that
  stops at a rung where it is beaten.
- ``scaling``: weak scaling under torchrun, one size after another.
- ``compare``: two sides measured now, interleaved, each at a git revision if asked, until the
  stopping rule says.
"""
