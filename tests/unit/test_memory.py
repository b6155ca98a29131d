"""Memory figures from a fake /proc: peaks, the reset of the RSS high-water mark, and the CPU case."""

from pathlib import Path

import torch

from flowrate.measure.memory import current_bytes, peak_rss_bytes, read_peaks, reset_peaks

STATUS = "Name:\tpython\nVmPeak:\t 900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"


def fake_proc(tmp_path: Path) -> Path:
    (tmp_path / "status").write_text(STATUS)
    (tmp_path / "clear_refs").write_text("")
    return tmp_path


def test_peak_and_current_rss_come_from_proc_status(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    assert peak_rss_bytes(proc) == 204800 * 1024
    assert current_bytes(torch.device("cpu"), proc) == (None, 102400 * 1024)


def test_reset_writes_clear_refs_so_the_peak_covers_the_run(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    assert reset_peaks(torch.device("cpu"), proc) is True
    assert (proc / "clear_refs").read_text() == "5"
    report = read_peaks(torch.device("cpu"), rss_reset=True, proc=proc)
    assert report.rss_scope == "run"
    assert report.process_peak_rss_bytes == 204800 * 1024
    assert report.device_peak_allocated_bytes is None and report.device_peak_reserved_bytes is None
    assert report.reason is not None and "cpu" in report.reason


def test_without_clear_refs_the_peak_says_it_covers_the_process(tmp_path: Path) -> None:
    (tmp_path / "status").write_text(STATUS)
    missing = tmp_path / "nowhere"
    assert reset_peaks(torch.device("cpu"), missing) is False
    assert read_peaks(torch.device("cpu"), rss_reset=False, proc=tmp_path).rss_scope == "process"


def test_real_process_figures_are_plausible() -> None:
    rss = peak_rss_bytes()
    assert rss is not None and rss > 10 * 2**20
