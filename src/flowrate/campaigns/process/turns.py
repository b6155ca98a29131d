"""Two runs in two live processes that take turns, interval by interval, on one machine.

A machine whose speed drifts over seconds (a neighbour's load, heat, a VM's host) moves a
process's throughput with it; runs made one after another see different stretches of that drift,
and no order of whole processes puts the same stretch under both sides. Two processes that take
turns do: one measures an interval (flowrate.measure.loop's stretch between sample points, about
target_interval_s) while the other waits, then they swap, so each side's intervals are spread
over the same seconds as the other's.

One token passes between the two over a connection (a socket pair). The process holding it works;
at each of its sample points it hands the token over and waits for it back. The second process
waits for the token before it does anything, its start-up included, so only one process works at
any time. A run's clock (``Turns.clock``) leaves out the time it waited, so its intervals, its
duration and its rates are its own work's. A process that ends hands the token over and closes
its end; the other then finds end of file, and from there works alone — as it does when its
partner fails or dies, so neither can wait for ever.

The device's energy counter counts both processes' work in a run's window, so a run taking turns
meters no energy (flowrate.harness.run.Hooks.unmetered says why).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

UNMETERED = "taking turns with another process, whose work falls in this run's window"
TOKEN = b"t"


class Turns:
    """One process's side of taking turns (module docstring): ``peer`` is its end of the connection,
    ``first`` whether it holds the token at the start."""

    def __init__(self, peer: Connection, first: bool, clock: Callable[[], float] = time.perf_counter) -> None:
        self._peer = peer
        self._first = first
        self._clock = clock
        self.waited_s = 0.0
        self.turns = 0  # times this process took the token back
        self.alone = False  # the partner has ended: no more waiting

    def clock(self) -> float:
        """This process's clock less the seconds it waited for its turn."""
        return self._clock() - self.waited_s

    def begin(self) -> None:
        """Before the run: the second process waits for its first turn."""
        if not self._first:
            self._wait()

    def at_sample_point(self, record: Any, so_far: Any) -> bool:
        """A run observer (flowrate.harness.run.RunObserver): hand the turn over, wait for it back,
        never stop the run."""
        self._hand_over()
        self._wait()
        return False

    def end(self) -> None:
        """After the run (or its failure): hand the turn over for good."""
        self._hand_over()
        self.alone = True
        self._peer.close()

    def _hand_over(self) -> None:
        if self.alone:
            return
        try:
            self._peer.send_bytes(TOKEN)
        except OSError:  # the partner has ended and closed its end
            self.alone = True

    def _wait(self) -> None:
        if self.alone:
            return
        before = self._clock()
        try:
            self._peer.recv_bytes()
            self.turns += 1
        except (EOFError, OSError):  # the partner has ended: work alone from here
            self.alone = True
        self.waited_s += self._clock() - before
