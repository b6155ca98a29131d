"""The device peak table: name matching, dense-only figures, reasons, and user-added entries."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from flowrate.config import Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.measure import peaks
from flowrate.measure.peaks import (
    BUILTIN_PEAKS,
    PEAKS_ENV,
    PRECISION_KEYS,
    DevicePeak,
    find_device,
    load_peak_file,
    peak_for,
    precision_key,
    register_peak,
    registered_peaks,
    unregister_peak,
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    # A user's FLOWRATE_PEAKS or a registration leaking from another test must not change answers.
    monkeypatch.delenv(PEAKS_ENV, raising=False)
    monkeypatch.setattr(peaks, "_registered", [])


# The strings torch.cuda.get_device_name returns, and the entry each must resolve to.
DEVICE_NAMES = {
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5 80GB",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H200": "NVIDIA H200 SXM 141GB",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 40GB (SXM4 or PCIe)",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 40GB (SXM4 or PCIe)",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 80GB SXM4",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
    "Tesla V100-SXM2-16GB": "NVIDIA Tesla V100 SXM2",
    "Tesla V100-SXM2-32GB": "NVIDIA Tesla V100 SXM2",
    "Tesla V100-PCIE-16GB": "NVIDIA Tesla V100 PCIe",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA L40": "NVIDIA L40",
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
}


@pytest.mark.parametrize(("device_name", "entry_name"), DEVICE_NAMES.items())
def test_device_names_resolve_to_their_own_entry(device_name: str, entry_name: str) -> None:
    entry = find_device(device_name)
    assert entry is not None
    assert entry.name == entry_name


def test_matching_ignores_case() -> None:
    entry = find_device("nvidia h100 80gb hbm3")
    assert entry is not None and entry.name == "NVIDIA H100 SXM5 80GB"


@pytest.mark.parametrize(
    "device_name",
    [
        "Tesla V100S-PCIE-32GB",  # V100S: higher clocks and bandwidth than V100
        "NVIDIA A10G",  # AWS variant, different figures from the A10
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "NVIDIA H200 NVL",
        "NVIDIA GH200 480GB",
        "AMD Instinct MI300A",
        "AMD EPYC 9R14",
        "cpu",
        "",
    ],
)
def test_near_neighbours_and_cpus_find_no_entry(device_name: str) -> None:
    assert find_device(device_name) is None


def test_every_builtin_entry_cites_a_url_and_says_dense() -> None:
    for entry in BUILTIN_PEAKS:
        assert "https://" in entry.source, entry.name
        assert "dense" in entry.notes.lower() and "sparse" in entry.notes.lower(), entry.name


def test_every_builtin_figure_is_a_known_key_and_plausible() -> None:
    for entry in BUILTIN_PEAKS:
        assert entry.dense_flops, entry.name
        for key, value in entry.dense_flops.items():
            assert key in PRECISION_KEYS, (entry.name, key)
            assert 1e12 < value < 3e15, (entry.name, key, value)
        assert entry.memory_bandwidth is not None and 1e11 < entry.memory_bandwidth < 1e13, entry.name
        if entry.host_link_bandwidth is not None:
            assert 1e10 < entry.host_link_bandwidth < 1e11, entry.name


def test_builtin_entries_have_distinct_names() -> None:
    names = [entry.name for entry in BUILTIN_PEAKS]
    assert len(names) == len(set(names))


def test_tensor_peaks_are_dense_not_sparse() -> None:
    # Sparse figures are exactly 2x these; a table carrying them would halve every MFU.
    expected = {
        ("NVIDIA H100 80GB HBM3", "bf16"): 989.4e12,
        ("NVIDIA H100 80GB HBM3", "tf32"): 494.7e12,
        ("NVIDIA H100 80GB HBM3", "fp32"): 67e12,
        ("NVIDIA H200", "bf16"): 989.4e12,
        ("NVIDIA H100 PCIe", "bf16"): 756e12,
        ("NVIDIA A100-SXM4-80GB", "bf16"): 312e12,
        ("NVIDIA A100-SXM4-80GB", "tf32"): 156e12,
        ("NVIDIA L4", "bf16"): 121e12,
        ("NVIDIA A10", "bf16"): 125e12,
        ("NVIDIA GeForce RTX 4090", "fp16"): 165.2e12,  # FP32 accumulate, not 330.3
        ("AMD Instinct MI300X", "bf16"): 1307.4e12,
        ("Tesla V100-SXM2-16GB", "fp16"): 125e12,
    }
    for (device_name, precision), flops in expected.items():
        found = peak_for(device_name, precision).flops
        assert found is not None and math.isclose(found, flops, rel_tol=1e-3), (device_name, precision)


def test_h200_has_h100_sxm_compute_and_more_bandwidth() -> None:
    h100, h200 = find_device("NVIDIA H100 80GB HBM3"), find_device("NVIDIA H200")
    assert h100 is not None and h200 is not None
    assert h200.dense_flops == h100.dense_flops
    assert h200.memory_bandwidth == 4.8e12
    assert h100.memory_bandwidth == 3.35e12


@pytest.mark.parametrize(
    ("precision", "key"),
    [
        ("fp32", "fp32"),
        ("tf32", "tf32"),
        ("bf16", "bf16"),
        ("pure-bf16", "bf16"),
        ("fp16", "fp16"),
        ("bfloat16", "bf16"),
        (Precision.PURE_BF16, "bf16"),
        (Precision.TF32, "tf32"),
        ("fp8", "fp8"),
        ("int8-dynamic", "int8"),  # int8 x int8 GEMMs
        ("int8-weights", "fp32"),  # int8 weights dequantized into the fp32 activations' matmul
    ],
)
def test_precision_key(precision: str, key: str) -> None:
    assert precision_key(precision) == key


def test_precision_key_rejects_unknown() -> None:
    with pytest.raises(ConfigError):
        precision_key("int8")


def test_peak_for_known_device() -> None:
    lookup = peak_for("NVIDIA H100 80GB HBM3", Precision.PURE_BF16)
    assert lookup.flops == 989.4e12
    assert lookup.memory_bandwidth == 3.35e12
    assert lookup.host_link_bandwidth == 63e9
    assert lookup.entry is not None and lookup.entry.name == "NVIDIA H100 SXM5 80GB"
    assert lookup.reason is None


def test_peak_for_unknown_device_is_empty_with_a_reason() -> None:
    lookup = peak_for("AMD EPYC 9R14", "fp32")
    assert lookup.flops is None and lookup.entry is None
    assert lookup.memory_bandwidth is None and lookup.host_link_bandwidth is None
    assert lookup.reason == (
        "no datasheet peak for 'AMD EPYC 9R14': add one with FLOWRATE_PEAKS=peaks.json "
        "or flowrate.measure.peaks.register_peak()"
    )


def test_fp8_and_int8_peaks_are_the_datasheets_dense_figures() -> None:
    expected = {
        ("NVIDIA H100 80GB HBM3", "fp8"): 1979e12,  # 3,958 with sparsity
        ("NVIDIA H100 80GB HBM3", "int8-dynamic"): 1979e12,  # TOPS
        ("NVIDIA H100 PCIe", "fp8"): 1513e12,
        ("NVIDIA H200", "fp8"): 1979e12,
        ("NVIDIA L40S", "fp8"): 733e12,
        ("NVIDIA L40S", "int8-dynamic"): 733e12,
        ("NVIDIA A100-SXM4-80GB", "int8-dynamic"): 624e12,
        ("NVIDIA A100-SXM4-40GB", "int8-dynamic"): 624e12,
        ("NVIDIA H100 80GB HBM3", "int8-weights"): 67e12,  # its matmuls are fp32's
    }
    for (device_name, precision), flops in expected.items():
        lookup = peak_for(device_name, precision)
        assert lookup.flops == pytest.approx(flops, rel=1e-12) and lookup.reason is None, (
            device_name,
            precision,
        )


def test_a_precision_the_table_lacks_says_the_table_lacks_it() -> None:
    # A100 has no fp8 units; the lookup cannot tell that from an entry nobody wrote: it says what it knows
    lookup = peak_for("NVIDIA A100-SXM4-80GB", "fp8")
    assert lookup.flops is None
    assert lookup.reason == (
        "the peak table has no fp8 figure for NVIDIA A100 80GB SXM4 (it lists fp32, tf32, bf16, fp16, "
        "int8): if its datasheet gives one, add it with FLOWRATE_PEAKS=peaks.json or "
        "flowrate.measure.peaks.register_peak()"
    )


def test_peak_for_precision_the_device_lacks_is_empty_with_a_reason() -> None:
    lookup = peak_for("Tesla V100-SXM2-16GB", "bf16")
    assert lookup.flops is None
    assert lookup.reason is not None
    assert lookup.reason.startswith(
        "the peak table has no bf16 figure for NVIDIA Tesla V100 SXM2 (it lists fp32, fp16)"
    )
    # The entry and its bandwidths still come back: they do not depend on the precision.
    assert lookup.entry is not None and lookup.memory_bandwidth == 0.9e12
    assert peak_for("Tesla V100-PCIE-16GB", "tf32").flops is None


def test_reasons_are_one_line() -> None:
    for lookup in (peak_for("mystery", "fp32"), peak_for("Tesla V100-PCIE-16GB", "pure-bf16")):
        assert lookup.reason is not None and "\n" not in lookup.reason


def _custom(name: str = "Acme Tensor 9000", match: tuple[str, ...] = ("acme", "9000")) -> DevicePeak:
    return DevicePeak(
        name=name,
        match=match,
        dense_flops={"bf16": 500e12, "fp32": 50e12},
        memory_bandwidth=2e12,
        host_link_bandwidth=None,
        source="Acme Tensor 9000 datasheet, https://example.com/acme-9000.pdf",
        notes="dense",
    )


def test_register_peak_makes_a_new_name_resolve_and_can_be_undone() -> None:
    peak = _custom()
    assert find_device("Acme Tensor 9000") is None
    register_peak(peak)
    try:
        assert find_device("Acme Tensor 9000") is peak
        assert peak_for("Acme Tensor 9000", "bf16").flops == 500e12
    finally:
        unregister_peak(peak)
    assert find_device("Acme Tensor 9000") is None
    unregister_peak(peak)  # a second removal is harmless


def test_registered_peaks_context_manager_cleans_up() -> None:
    with registered_peaks(_custom()):
        assert find_device("acme TENSOR 9000") is not None
    assert find_device("acme TENSOR 9000") is None


def test_registered_entries_override_builtin_ones_latest_first() -> None:
    first = _custom(name="my H100 (first)", match=("h100",))
    second = _custom(name="my H100 (second)", match=("h100",))
    with registered_peaks(first, second):
        entry = find_device("NVIDIA H100 80GB HBM3")
        assert entry is not None and entry.name == "my H100 (second)"


def test_register_peak_rejects_a_non_peak() -> None:
    with pytest.raises(FlowrateError, match="DevicePeak"):
        register_peak({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dense_flops": {"fp64": 1e15}}, "not one of fp32, tf32, bf16, fp16, fp8, int8"),
        ({"dense_flops": {"bf16": 989.4}}, r"looks like TFLOP/s.*write 989\.4e12"),
        ({"dense_flops": {"bf16": -1e12}}, "positive"),
        ({"memory_bandwidth": 3.35}, r"bytes/s \(3\.35 TB/s is 3\.35e12\)"),
        ({"match": ()}, "at least one"),
        ({"match": ("h100", "")}, "non-empty strings"),
        ({"source": " "}, "datasheet"),
    ],
)
def test_device_peak_validates(changes: dict[str, object], message: str) -> None:
    with pytest.raises(FlowrateError, match=message):
        dataclasses.replace(_custom(), **changes)  # type: ignore[arg-type]


def test_device_peak_normalises_match_and_copies_flops() -> None:
    flops = {"bf16": 1e14}
    peak = dataclasses.replace(_custom(), match="ACME", dense_flops=flops)  # type: ignore[arg-type]
    flops["bf16"] = 2e14
    assert peak.match == ("acme",)
    assert peak.dense_flops == {"bf16": 1e14}
    assert len({peak, dataclasses.replace(peak), *BUILTIN_PEAKS}) == len(BUILTIN_PEAKS) + 1
    # Results code may serialise a lookup; the entry must survive asdict and json.
    json.dumps(dataclasses.asdict(peak_for("NVIDIA L4", "bf16")))


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


_FILE_ENTRY = {
    "name": "Lab Card X1",
    "match": ["lab card", "x1"],
    "dense_flops": {"bf16": 200e12, "fp32": 20e12},
    "memory_bandwidth": 1e12,
    "host_link_bandwidth": 31.5e9,
    "source": "Lab Card X1 datasheet, https://example.com/x1.pdf",
    "notes": "dense",
}


def test_peaks_env_file_adds_an_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "peaks.json", [_FILE_ENTRY])
    assert find_device("Lab Card X1") is None
    monkeypatch.setenv(PEAKS_ENV, str(path))
    lookup = peak_for("Lab Card X1 (rev 2)", "bf16")
    assert lookup.flops == 200e12
    assert lookup.host_link_bandwidth == 31.5e9
    assert lookup.entry is not None and lookup.entry.match == ("lab card", "x1")
    reason = peak_for("Lab Card X1", "fp16").reason
    assert reason is not None and reason.startswith(
        "the peak table has no fp16 figure for Lab Card X1 (it lists fp32, bf16)"
    )


def test_peaks_env_file_exclude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = {**_FILE_ENTRY, "exclude": ["lite"]}
    monkeypatch.setenv(PEAKS_ENV, str(_write(tmp_path / "peaks.json", [entry])))
    assert find_device("Lab Card X1") is not None
    assert find_device("Lab Card X1 Lite") is None


def test_peaks_env_file_is_read_once_per_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "peaks.json", [_FILE_ENTRY])
    monkeypatch.setenv(PEAKS_ENV, str(path))
    assert find_device("Lab Card X1") is not None
    path.write_text("not json any more", encoding="utf-8")
    assert find_device("Lab Card X1") is not None  # cached, not re-read
    other = _write(tmp_path / "other.json", [])
    monkeypatch.setenv(PEAKS_ENV, str(other))
    assert find_device("Lab Card X1") is None


def test_peaks_env_file_entries_come_before_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = {**_FILE_ENTRY, "name": "our L4 at 60 W", "match": ["l4"]}
    monkeypatch.setenv(PEAKS_ENV, str(_write(tmp_path / "peaks.json", [mine])))
    entry = find_device("NVIDIA L4")
    assert entry is not None and entry.name == "our L4 at 60 W"


def test_load_peak_file_accepts_optional_fields_missing(tmp_path: Path) -> None:
    entry = {key: _FILE_ENTRY[key] for key in ("name", "match", "dense_flops", "source")}
    (peak,) = load_peak_file(_write(tmp_path / "peaks.json", [entry]))
    assert peak.memory_bandwidth is None and peak.host_link_bandwidth is None and peak.notes == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"name": "x"}), "expected a JSON list"),
        (json.dumps(["H100"]), "entry 0: expected an object"),
        (json.dumps([{**_FILE_ENTRY, "flops": 1}]), "unknown field"),
        (json.dumps([{"name": "x", "match": ["x"]}]), "missing dense_flops, source"),
        (json.dumps([_FILE_ENTRY, {**_FILE_ENTRY, "dense_flops": {"bf16": 200}}]), "entry 1: .*200e12"),
        (json.dumps([{**_FILE_ENTRY, "dense_flops": {"fp64": 1e15}}]), "fp64"),
        (json.dumps([{**_FILE_ENTRY, "dense_flops": [1e15]}]), "dense_flops must be an object"),
        (json.dumps([{**_FILE_ENTRY, "match": 7}]), "match must be a list"),
    ],
)
def test_malformed_peak_file_names_the_file_and_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad-peaks.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FlowrateError, match=message) as caught:
        load_peak_file(path)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_malformed_env_file_raises_from_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[", encoding="utf-8")
    monkeypatch.setenv(PEAKS_ENV, str(path))
    with pytest.raises(FlowrateError, match=r"broken\.json"):
        peak_for("NVIDIA H100 80GB HBM3", "bf16")


def test_missing_peak_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(FlowrateError, match=r"nowhere\.json: cannot read it"):
        load_peak_file(tmp_path / "nowhere.json")
