"""Knowing before running: a step traced on the meta device, a roofline cost model, the compile report.

trace.py (one step on fake tensors) and ops.py (each op's FLOPs, bytes and kind, as recorded),
devices.py (the target's effective rates: datasheet peaks x measured efficiency), calibration.py
(those measurements and their file) with probes.py (the timed operations), cost.py (the roofline),
memory.py (what each execution mode needs), report.py (the compile report), validate.py
(`flowrate validate`'s checks), check.py (`flowrate estimate --check`: predictions against
recorded runs).
"""
