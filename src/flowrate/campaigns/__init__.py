"""Campaigns: many runs, each in a fresh process: repeats, sweeps, scaling."""
