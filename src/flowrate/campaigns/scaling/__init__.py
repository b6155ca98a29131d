"""`flowrate scaling`: weak scaling under torchrun, each size a launch of its own (run), the sizes
planned and recorded (plan), and the communication share of each size's step (comm)."""
