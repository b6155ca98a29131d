"""Execution modes: how a model's step runs on a device (resident, streaming), its precision,
data parallelism, compilation and checkpoints."""
