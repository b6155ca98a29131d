"""Knowing before running: a step traced on the meta device, a roofline cost model, the compile report.

trace.py (every op of one step with its FLOPs and bytes, on fake tensors), devices.py (the target's
effective rates: datasheet peaks x measured efficiency), calibration.py (those measurements),
cost.py (the roofline), memory.py (what each execution mode needs), report.py (the compile
report), validate.py (`flowrate validate`'s checks).
"""
