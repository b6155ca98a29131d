"""Real data for a run: sharded datasets on disk, their writers and importers, and the loader
that feeds them to the device.

records.py (the on-disk format and its checks), writer.py, make.py (a problem's synthetic data on
disk), importers.py (flat token files, image folders), loader.py (shards to workers and ranks),
feed.py (the run's side: copy to the device, input wait per interval). The input analyzer
(`flowrate analyze-input`) is flowrate.harness.analyze_input.
"""
