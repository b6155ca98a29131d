"""What the fork server imports before it forks any run (flowrate.campaigns.process.child): torch, and on
a CPU-only build of torch also torch._dynamo, which the first optimizer a run builds imports
(torch.optim's constructors are wrapped to disable dynamo), and flowrate's run harness
(flowrate.harness.api, with the results, estimate and problem modules it imports), so that a
run's start-up does not pay for those imports again: the harness is most of what a forked run
imported for itself (benchmarks/fork_preload.py measures it).

The harness's import starts one thread: the BLAS thread pool of SciPy's OpenBLAS, as numpy's
(which torch imports) starts its own. OpenBLAS shuts its pool down before a fork and starts it
again when a child first calls it, so a forked run inherits no half-held lock from it.

Only the fork server imports this module, and its first act is to ignore SIGINT. Ctrl-C goes to
the whole process group, the fork server included; multiprocessing protects the server from it
only once its preload is done, so a Ctrl-C during these imports (seconds on a small CPU) would
print the import's KeyboardInterrupt traceback beside the command's own one line. The caller
handles the interrupt and ends its children; every run's process sets Python's handler back
before it runs anything (child._child_main).

No import touches a device here. On a CUDA or ROCm build dynamo and the harness stay out: what
their imports query of the device has not been checked on a GPU, and a CUDA driver initialised
before a fork does not work in the child.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import torch  # noqa: E402  (after the handler: the import is what a Ctrl-C must not reach)

if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
    import torch._dynamo

    import flowrate.harness.api  # noqa: F401  (imported for the runs the server forks)
