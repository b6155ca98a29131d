"""The problem zoo: one module per model family, collected by ``flowrate.problems.registry``.

Each module defines its config dataclass, its ``Problem`` subclass and a ``FAMILIES`` tuple; the
kernels package collects its modules' families the same way.
The registry is not imported here, so importing a single family module stays cycle-free.
"""
