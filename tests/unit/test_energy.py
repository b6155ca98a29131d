"""Energy meters with NVML and powercap faked: exact joules, labelled methods, and reasons, never raises."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from flowrate.measure.energy import (
    METHOD_NVML_COUNTER,
    METHOD_NVML_SAMPLED,
    METHOD_RAPL,
    EnergyReading,
    open_energy_meter,
)
from flowrate.measure.energy import nvml as nvml_meter
from flowrate.measure.energy import rapl as rapl_meter
from flowrate.measure.energy.nvml import NvmlSampledMeter

CUDA0 = torch.device("cuda", 0)
PCI = "00000000:1A:00.0"
H100 = "gpu0 (NVIDIA H100 80GB HBM3)"


class FakeClock:
    """Returns whatever time the test set last."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeNVMLError(Exception):
    pass


class FakeNotSupported(FakeNVMLError):
    pass


class FakeNVML:
    """A pynvml stand-in: one H100 at PCI bus 1A, counter and power set by the test."""

    NVMLError = FakeNVMLError
    NVMLError_NotSupported = FakeNotSupported

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.energy_mj: int | Exception = 1_000_000
        self.power_mw: int | Exception = 300_000
        self.buses = {PCI: "h100"}  # PCI bus id -> handle
        self.nvml_index = {"h100": 0}  # handle -> NVML's own index (all GPUs, PCI order)

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByPciBusId(self, pci: str) -> str:
        if pci not in self.buses:
            raise FakeNVMLError("Not Found")
        return self.buses[pci]

    def nvmlDeviceGetIndex(self, handle: str) -> int:
        return self.nvml_index[handle]

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.calls.append(f"by-index {index}")
        if index != 0:
            raise FakeNVMLError("Invalid Argument")
        return "h100"

    def nvmlDeviceGetName(self, handle: str) -> bytes:
        return b"NVIDIA H100 80GB HBM3"  # old pynvml returns bytes

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        self.calls.append("energy")
        if isinstance(self.energy_mj, Exception):
            raise self.energy_mj
        return self.energy_mj

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        if isinstance(self.power_mw, Exception):
            raise self.power_mw
        return self.power_mw


@pytest.fixture
def pci_known(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_meter, "_cuda_pci_bus_id", lambda index: PCI if index == 0 else None)


# --- EnergyReading ------------------------------------------------------------------------------


def test_reading_to_dict_is_json_ready() -> None:
    reading = EnergyReading(450.0, 2.5, METHOD_NVML_COUNTER, (H100,), {H100: 450.0}, caveats=("c",))
    out = reading.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert out["average_watts"] == 180.0
    assert out["domains"] == [H100]
    assert out["caveats"] == ["c"]


def test_reading_without_joules_has_no_average() -> None:
    assert EnergyReading(None, 2.0, None, (), {}, reason="r").average_watts is None
    assert EnergyReading(1.0, 0.0, None, (), {}).average_watts is None


# --- NVML energy counter --------------------------------------------------------------------------


@pytest.mark.usefixtures("pci_known")
def test_nvml_counter_gives_exact_joules_and_watts() -> None:
    nvml, clock = FakeNVML(), FakeClock()
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=clock)
    assert meter.method == METHOD_NVML_COUNTER
    clock.now, nvml.energy_mj = 10.0, 1_000_000
    meter.start()
    clock.now, nvml.energy_mj = 12.5, 1_450_000
    reading = meter.stop()
    assert reading == EnergyReading(450.0, 2.5, METHOD_NVML_COUNTER, (H100,), {H100: 450.0})
    assert reading.average_watts == 180.0
    assert meter.power_watts() == 300.0
    meter.close()
    meter.close()
    assert nvml.calls.count("init") == nvml.calls.count("shutdown") == 1
    assert "by-index 0" not in nvml.calls  # found by PCI bus id


@pytest.mark.usefixtures("pci_known")
def test_nvml_counter_short_window_says_so() -> None:
    nvml, clock = FakeNVML(), FakeClock()
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=clock)
    meter.start()
    clock.now, nvml.energy_mj = 0.5, 1_100_000
    reading = meter.stop()
    assert reading.joules == 100.0
    assert len(reading.caveats) == 1
    assert "under 1 s" in reading.caveats[0]
    assert "up to 20%" in reading.caveats[0]


@pytest.mark.usefixtures("pci_known")
def test_nvml_counter_failing_at_stop_gives_reason() -> None:
    nvml, clock = FakeNVML(), FakeClock()
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=clock)
    meter.start()
    clock.now, nvml.energy_mj = 3.0, FakeNVMLError("GPU is lost")
    reading = meter.stop()
    assert reading.joules is None
    assert reading.seconds == 3.0
    assert reading.method == METHOD_NVML_COUNTER
    assert reading.reason == "NVML energy counter unreadable at stop: GPU is lost"


def test_nvml_handle_by_index_when_torch_has_no_pci_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(name="x"))
    nvml = FakeNVML()
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert "by-index 0" in nvml.calls
    assert reading.joules == 0.0
    assert any("not PCI bus id" in c for c in reading.caveats)


def test_nvml_domain_names_the_physical_gpu_not_the_torch_index(monkeypatch: pytest.MonkeyPatch) -> None:
    # a rank launched with CUDA_VISIBLE_DEVICES=3: its cuda:0 is NVML's GPU 3, at its own PCI address;
    # named gpu0, every such rank of a host would look like one meter to the merge (issue 40.7)
    monkeypatch.setattr(
        nvml_meter, "_cuda_pci_bus_id", lambda index: "00000000:9B:00.0" if index == 0 else None
    )
    nvml = FakeNVML()
    nvml.buses["00000000:9B:00.0"], nvml.nvml_index["gpu-3"] = "gpu-3", 3
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.domains == ("gpu3 (NVIDIA H100 80GB HBM3)",)
    assert not any("not PCI bus id" in c for c in reading.caveats)


def test_pci_bus_id_formatted_as_nvml_expects(monkeypatch: pytest.MonkeyPatch) -> None:
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x1A, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    assert nvml_meter._cuda_pci_bus_id(0) == PCI


def test_nvml_unknown_device_gives_reason_and_shuts_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_meter, "_cuda_pci_bus_id", lambda index: None)
    nvml = FakeNVML()
    meter = open_energy_meter(torch.device("cuda", 3), nvml=nvml, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.joules is None
    assert reading.reason == "no energy counter: NVML has no device for cuda:3 (Invalid Argument)"
    assert nvml.calls.count("shutdown") == 1


# --- NVML power-sampled fallback ----------------------------------------------------------------


@pytest.mark.usefixtures("pci_known")
def test_counter_not_supported_falls_back_to_sampled_power() -> None:
    nvml, clock = FakeNVML(), FakeClock()
    nvml.energy_mj = FakeNotSupported("Not Supported")
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=clock, sample_period_s=None)
    assert isinstance(meter, NvmlSampledMeter)
    energy_reads = nvml.calls.count("energy")
    clock.now, nvml.power_mw = 10.0, 100_000
    meter.start()
    clock.now, nvml.power_mw = 11.0, 200_000
    meter.sample()
    clock.now, nvml.power_mw = 13.0, 100_000
    reading = meter.stop()
    # Trapezoid: 1 s at mean 150 W, then 2 s at mean 150 W.
    assert reading.joules == 450.0
    assert reading.seconds == 3.0
    assert reading.average_watts == 150.0
    assert reading.method == METHOD_NVML_SAMPLED
    assert reading.domains == (H100,)
    assert any("Not Supported" in c for c in reading.caveats)
    assert any("~1 s average" in c and "approximate" in c for c in reading.caveats)
    assert nvml.calls.count("energy") == energy_reads  # the counter is never read again


@pytest.mark.usefixtures("pci_known")
def test_sampled_power_skips_failed_samples() -> None:
    nvml, clock = FakeNVML(), FakeClock()
    nvml.energy_mj = FakeNotSupported("Not Supported")
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=clock, sample_period_s=None)
    assert isinstance(meter, NvmlSampledMeter)
    meter.start()
    clock.now, nvml.power_mw = 1.0, FakeNVMLError("Unknown Error")
    meter.sample()
    clock.now, nvml.power_mw = 2.0, 300_000
    reading = meter.stop()
    assert reading.joules == 600.0
    assert any("1 power sample(s) failed" in c for c in reading.caveats)


@pytest.mark.usefixtures("pci_known")
def test_sampled_power_background_thread_starts_and_stops() -> None:
    nvml = FakeNVML()
    nvml.energy_mj = FakeNotSupported("Not Supported")
    meter = open_energy_meter(CUDA0, nvml=nvml, sample_period_s=0.001)  # real clock, constant 300 W
    assert isinstance(meter, NvmlSampledMeter)
    meter.start()
    thread = meter._thread
    assert thread is not None and thread.is_alive()
    reading = meter.stop()
    assert not thread.is_alive()
    assert reading.joules == pytest.approx(300.0 * reading.seconds)
    meter.close()
    assert nvml.calls.count("shutdown") == 1


@pytest.mark.usefixtures("pci_known")
def test_no_counter_and_no_power_gives_reason() -> None:
    nvml = FakeNVML()
    nvml.energy_mj = FakeNotSupported("Not Supported")
    nvml.power_mw = FakeNotSupported("Not Supported")
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.joules is None
    assert reading.method is None
    assert reading.reason == (
        f"no energy counter on {H100}: NVML energy counter (Not Supported) and power reading "
        "(Not Supported) both unavailable"
    )
    assert nvml.calls.count("shutdown") == 1


# --- NVML unavailable ---------------------------------------------------------------------------


def test_pynvml_missing_gives_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    clock = FakeClock()
    meter = open_energy_meter(CUDA0, clock=clock)
    meter.start()
    clock.now = 2.0
    reading = meter.stop()
    assert reading == EnergyReading(
        None, 2.0, None, (), {}, reason="nvidia-ml-py is not installed: pip install 'flowrate[gpu]'"
    )
    assert meter.power_watts() is None


def test_nvml_init_failure_gives_reason() -> None:
    nvml = FakeNVML()

    def no_driver() -> None:
        raise FakeNVMLError("Driver Not Loaded")

    nvml.nvmlInit = no_driver  # type: ignore[method-assign]
    meter = open_energy_meter(CUDA0, nvml=nvml, clock=FakeClock())
    meter.start()
    reason = meter.stop().reason
    assert reason is not None and "nvmlInit failed (Driver Not Loaded)" in reason


# --- RAPL ---------------------------------------------------------------------------------------

MAX_RANGE = 262_143_328_850  # µJ, a typical package range


def zone(root: Path, dirname: str, name: str, energy_uj: int, max_uj: int = MAX_RANGE) -> Path:
    path = root / dirname
    path.mkdir()
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def set_uj(path: Path, energy_uj: int) -> None:
    (path / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def powercap(tmp_path: Path) -> dict[str, Path]:
    """Package 0 with core and dram subzones, plus psys and the MMIO duplicate, which overlap it."""
    (tmp_path / "intel-rapl").mkdir()  # the control type itself: no name, no counter
    zones = {
        "package": zone(tmp_path, "intel-rapl:0", "package-0", 5_000_000),
        "core": zone(tmp_path, "intel-rapl:0:0", "core", 1_000_000),
        "dram": zone(tmp_path, "intel-rapl:0:1", "dram", 2_000_000),
        "psys": zone(tmp_path, "intel-rapl:1", "psys", 9_000_000),
        "mmio": zone(tmp_path, "intel-rapl-mmio:0", "package-0", 7_000_000),
    }
    return {"root": tmp_path, **zones}


def test_rapl_package_and_dram_exact(powercap: dict[str, Path]) -> None:
    clock = FakeClock()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=clock)
    assert meter.method == METHOD_RAPL
    clock.now = 1.0
    meter.start()
    set_uj(powercap["package"], 205_000_000)  # +200 J
    set_uj(powercap["dram"], 22_000_000)  # +20 J
    set_uj(powercap["core"], 151_000_000)  # inside the package: must not count
    set_uj(powercap["psys"], 999_000_000)
    clock.now = 3.0
    reading = meter.stop()
    assert reading == EnergyReading(
        220.0, 2.0, METHOD_RAPL, ("package-0", "dram-0"), {"package-0": 200.0, "dram-0": 20.0}
    )
    assert reading.average_watts == 110.0


def test_rapl_wrap_around_exact(powercap: dict[str, Path]) -> None:
    clock = FakeClock()
    set_uj(powercap["package"], MAX_RANGE - 30_000_000)
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=clock)
    meter.start()
    set_uj(powercap["package"], 70_000_000)  # 30 J to the wrap, 70 J after it
    clock.now = 10.0
    reading = meter.stop()
    assert reading.per_domain_joules == {"package-0": 100.0, "dram-0": 0.0}
    assert reading.caveats == ()  # 10 s is far below the 262 s a wrap takes at 1 kW


def test_rapl_gap_long_enough_for_two_wraps_says_so(tmp_path: Path) -> None:
    package = zone(tmp_path, "intel-rapl:0", "package-0", 0, max_uj=1_000_000_000)  # 1 s at 1 kW
    clock = FakeClock()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=tmp_path, clock=clock)
    meter.start()
    set_uj(package, 500_000_000)
    clock.now = 5.0
    reading = meter.stop()
    assert reading.joules == 500.0
    assert reading.caveats == (
        "package-0: 5 s between counter reads exceeds the 1 s its counter takes to wrap at 1000 W; "
        "a second wrap would go unseen",
    )


def test_rapl_power_watts_is_average_since_last_call(powercap: dict[str, Path]) -> None:
    clock = FakeClock()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=clock)
    assert meter.power_watts() is None  # not started
    meter.start()
    set_uj(powercap["package"], 105_000_000)  # +100 J
    clock.now = 2.0
    assert meter.power_watts() == 50.0
    set_uj(powercap["dram"], 32_000_000)  # +30 J
    clock.now = 3.0
    assert meter.power_watts() == 30.0
    clock.now = 4.0
    reading = meter.stop()
    assert reading.joules == 130.0  # intermediate reads change nothing in the total
    assert meter.power_watts() is None  # stopped


def test_rapl_missing_counter_file_left_out(powercap: dict[str, Path]) -> None:
    (powercap["dram"] / "energy_uj").unlink()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.domains == ("package-0",)
    assert reading.joules == 0.0
    assert len(reading.caveats) == 1
    assert reading.caveats[0].startswith("RAPL domains left out as unreadable: dram-0")


def test_rapl_no_counter_readable_gives_reason(tmp_path: Path) -> None:
    package = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    (package / "energy_uj").unlink()
    (package / "energy_uj").mkdir()  # reading a directory fails even as root
    meter = open_energy_meter(torch.device("cpu"), powercap_root=tmp_path, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.joules is None
    assert reading.reason is not None
    assert reading.reason.startswith(f"RAPL energy counters at {tmp_path} are unreadable: package-0 (")


def test_rapl_permission_denied_gives_reason(
    powercap: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(path: Path) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(rapl_meter, "_read_counter", denied)  # tests run as root: chmod would not block
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=FakeClock())
    meter.start()
    reason = meter.stop().reason
    assert reason is not None
    assert reason.startswith(f"RAPL energy counters at {powercap['root']} are not readable by this user:")
    assert "run as root or make energy_uj readable" in reason


def test_rapl_counter_vanishing_mid_window_gives_reason(powercap: dict[str, Path]) -> None:
    clock = FakeClock()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=powercap["root"], clock=clock)
    meter.start()
    (powercap["dram"] / "energy_uj").unlink()
    clock.now = 2.0
    assert meter.power_watts() is None
    reading = meter.stop()
    assert reading.joules is None
    assert reading.seconds == 2.0
    assert reading.method == METHOD_RAPL
    assert reading.reason is not None
    assert reading.reason.startswith("RAPL energy counter unreadable during the window:")
    # The next window starts afresh once the counter is back.
    set_uj(powercap["dram"], 2_000_000)
    meter.start()
    assert meter.stop().joules == 0.0


def test_rapl_wrap_with_unknown_range_gives_reason(tmp_path: Path) -> None:
    package = zone(tmp_path, "intel-rapl:0", "package-0", 50_000_000)
    (package / "max_energy_range_uj").unlink()
    meter = open_energy_meter(torch.device("cpu"), powercap_root=tmp_path, clock=FakeClock())
    meter.start()
    set_uj(package, 10_000_000)
    reason = meter.stop().reason
    assert reason is not None and "wrapped and max_energy_range_uj is unreadable" in reason


@pytest.mark.parametrize("make_root", [lambda p: p, lambda p: p / "absent"])
def test_no_rapl_zones_gives_reason(tmp_path: Path, make_root: Any) -> None:
    root = make_root(tmp_path)
    meter = open_energy_meter(torch.device("cpu"), powercap_root=root, clock=FakeClock())
    meter.start()
    reading = meter.stop()
    assert reading.joules is None
    assert reading.reason == f"no energy counter: {root} has no RAPL zones (common in VMs and containers)"


# --- Whatever machine this is -------------------------------------------------------------------


def test_real_cpu_meter_never_raises() -> None:
    meter = open_energy_meter(torch.device("cpu"))
    meter.start()
    meter.power_watts()
    reading = meter.stop()
    meter.close()
    assert (reading.joules is None) == (reading.reason is not None)
    json.dumps(reading.to_dict())


def test_other_device_types_give_reason() -> None:
    meter = open_energy_meter(torch.device("meta"), clock=FakeClock())
    meter.start()
    assert meter.stop().reason == "no energy counter for meta devices"


def test_stop_before_start_is_a_bug() -> None:
    meter = open_energy_meter(torch.device("meta"), clock=FakeClock())
    with pytest.raises(RuntimeError, match="before start"):
        meter.stop()
