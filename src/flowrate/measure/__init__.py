"""Measurement: the loop clock, rates and their statistics, device, energy, memory, FLOPs, peaks."""
