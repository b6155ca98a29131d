"""What the fork server imports before it forks any run (flowrate.campaigns.process.child): torch, and on
a CPU-only build of torch also torch._dynamo, which the first optimizer a run builds imports
(torch.optim's constructors are wrapped to disable dynamo), so that a run's start-up does not pay
for those imports again.

Only the fork server imports this module, and its first act is to ignore SIGINT. Ctrl-C goes to
the whole process group, the fork server included; multiprocessing protects the server from it
only once its preload is done, so a Ctrl-C during these imports (seconds on a small CPU) would
print the import's KeyboardInterrupt traceback beside the command's own one line. The caller
handles the interrupt and ends its children; every run's process sets Python's handler back
before it runs anything (child._child_main).

Neither import starts a thread or touches a device here. On a CUDA or ROCm build dynamo stays out:
what its import queries of the device has not been checked on a GPU, and a CUDA driver
initialised before a fork does not work in the child. This module imports nothing else of
flowrate's.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import torch  # noqa: E402  (after the handler: the import is what a Ctrl-C must not reach)

if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
    import torch._dynamo
