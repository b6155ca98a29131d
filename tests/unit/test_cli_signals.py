"""SIGTERM and Ctrl-C at the CLI's boundary, signalled to this process: each raises a
KeyboardInterrupt of its own class in the command, and the command ends with one line and 143
(`terminated`) or 130 (`interrupted`); the handlers before are put back after."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from flowrate.cli.boundary import Interrupted, Terminated, answer, signals_as_interrupts


def _signal_self(signum: int) -> None:
    """Send ``signum`` to this process and give Python the moment it takes to run the handler."""
    os.kill(os.getpid(), signum)
    time.sleep(5)
    raise AssertionError(f"signal {signum} raised nothing")


def _answered(command: Callable[[], object], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as done, signals_as_interrupts():
        answer(command)
    code = done.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err.strip().splitlines()


def test_sigterm_ends_a_command_with_143_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    raised: list[BaseException] = []

    def command() -> None:
        try:
            _signal_self(signal.SIGTERM)
        except BaseException as error:
            raised.append(error)
            raise

    assert _answered(command, capsys) == (143, ["error: terminated"])
    assert isinstance(raised[0], Terminated) and isinstance(raised[0], KeyboardInterrupt)


def test_ctrl_c_ends_a_command_with_130_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    raised: list[BaseException] = []

    def command() -> None:
        try:
            _signal_self(signal.SIGINT)
        except BaseException as error:
            raised.append(error)
            raise

    assert _answered(command, capsys) == (130, ["error: interrupted"])
    assert type(raised[0]) is Interrupted  # not KeyboardInterrupt itself (Interrupted's docstring)


def test_a_command_that_cleans_up_and_raises_its_own_interrupt_still_ends_with_143(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As serve-bench and live compare do: catch the interrupt, keep what was measured, raise a
    KeyboardInterrupt of their own; a second SIGTERM meanwhile does not cut the cleanup short."""
    cleaned: list[bool] = []

    def command() -> None:
        try:
            _signal_self(signal.SIGTERM)
        except KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            cleaned.append(True)
        raise KeyboardInterrupt

    assert _answered(command, capsys) == (143, ["error: terminated"])
    assert cleaned == [True]


class _SignalledWhileFinalized:
    """An object whose finalizer takes ``signum``, as a DataLoader iterator's __del__, joining its
    workers, may when the signal comes."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        time.sleep(0.5)  # the handler runs here, and Python drops what it raises


@pytest.mark.parametrize(
    ("signum", "code", "line"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")]
)
def test_a_signal_taken_in_a_finalizer_still_ends_the_command(
    signum: int, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def command() -> None:
        _SignalledWhileFinalized(signum)  # dropped at once
        time.sleep(5)
        raise AssertionError("the signal was lost in the finalizer")

    assert _answered(command, capsys) == (code, [f"error: {line}"])  # and no 'Exception ignored'


def test_the_handlers_before_are_put_back_and_a_callers_own_is_kept() -> None:
    def callers(signum: int, frame: object) -> None:
        """A handler of the caller's."""

    before = signal.signal(signal.SIGTERM, callers)
    try:
        with signals_as_interrupts():
            assert signal.getsignal(signal.SIGTERM) is callers
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, before)
    with signals_as_interrupts():
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, callers)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
