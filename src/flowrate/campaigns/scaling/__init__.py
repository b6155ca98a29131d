"""`flowrate scaling`: weak scaling under torchrun, each size a launch of its own (run), the sizes
planned and recorded (plan), the communication share of each size's step (comm), and a run's
time to solution projected to a stored study's sizes (projection, `flowrate run --scaling`)."""
