"""A --budget counts from when the command started: the process's start for a program, the call
for a command line called from inside a longer-lived process."""

from __future__ import annotations

import subprocess
import sys
import time

from flowrate import process_clock


def test_a_command_called_in_process_counts_from_the_call() -> None:
    before = time.monotonic()
    process_clock.mark_command_start(fresh=False)
    assert before <= process_clock.command_start() <= time.monotonic()


def test_a_program_counts_from_its_process_s_start_before_its_imports() -> None:
    # the child sleeps 1 s before marking: a start counted from the mark would be under 0.1 s old
    code = (
        "import time; time.sleep(1.0)\n"
        "from flowrate import process_clock\n"
        "process_clock.mark_command_start(fresh=True)\n"
        "print(time.monotonic() - process_clock.command_start())"
    )
    child = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    age = float(child.stdout)
    assert 1.0 <= age < 60.0
