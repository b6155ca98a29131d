"""`flowrate sweep`: a grid of configurations (spec: grids, sweep files, planning; command: the
keys each command's config takes; name: a sweep's name) run point by point, resumed and
skipping batches past one that ran out of memory (run)."""
