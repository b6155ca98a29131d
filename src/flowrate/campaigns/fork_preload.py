"""What the fork server imports before it forks any run (flowrate.campaigns.child): torch, and on
a CPU-only build of torch also torch._dynamo, which the first optimizer a run builds imports
(torch.optim's constructors are wrapped to disable dynamo): about 1.5 s of every training run's
start-up on this project's 2-vCPU CPU, now paid once.

Neither starts a thread or touches a device here. On a CUDA or ROCm build dynamo stays out: what
its import queries of the device has not been checked on a GPU, and a CUDA driver initialised
before a fork does not work in the child. This module imports nothing else of flowrate's.
"""

import torch

if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
    import torch._dynamo
