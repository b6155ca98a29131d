"""The harness: build a run from its config, drive the timed loop, assemble the Result; users' own loops."""
