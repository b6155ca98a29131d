"""The built-in peak table: each device's dense figures as its datasheet prints them, cited.

Figures are in the datasheet's own units (TFLOP/s, TB/s, GB of memory); flowrate.measure.peaks
turns each row into a ``DevicePeak`` in FLOP/s, bytes/s and bytes, and says which figures are
chosen (dense, never sparse; FP32 accumulate on consumer cards) and how names are matched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DATASHEETS", "Datasheet"]

# PCIe x16, per direction, theoretical: lanes x transfer rate x 128b/130b encoding / 8 bits.
_PCIE3_X16 = 15.75e9
_PCIE4_X16 = 31.5e9
_PCIE5_X16 = 63.0e9


@dataclass(frozen=True)
class Datasheet:
    """One device's row, in the datasheet's units; the fields are ``DevicePeak``'s (see there)."""

    name: str
    match: tuple[str, ...]
    tflops: Mapping[str, float]  # precision key -> dense TFLOP/s
    memory_tb_s: float
    host_link: float | None  # bytes/s per direction
    source: str
    notes: str
    exclude: tuple[str, ...] = ()
    memory_gb: float | None = None  # GiB, as "80GB" of HBM is


_V100 = (
    "NVIDIA Tesla V100 GPU Accelerator datasheet, "
    "https://images.nvidia.com/content/technologies/volta/pdf/tesla-volta-v100-datasheet-letter-fnl-web.pdf"
)
_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/ and "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet; dense tensor "
    "figures from the NVIDIA H100 Tensor Core GPU Architecture whitepaper, "
    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
)
_H200 = "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/"
_ADA = (
    "NVIDIA Ada GPU Architecture whitepaper (appendix tables), "
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
)

# Searched in this order after user entries. Variants come before the entry they would otherwise
# shadow, and ``exclude`` guards the generic entry as well, so the order is belt and braces.
DATASHEETS: tuple[Datasheet, ...] = (
    Datasheet(
        "NVIDIA Tesla V100 SXM2",
        ("v100", "sxm2"),
        {"fp32": 15.7, "fp16": 125.0},
        0.9,
        None,
        _V100,
        "Volta has FP16 tensor cores only (no TF32, no bf16, no sparsity); 125 is FP16 with FP32 "
        "accumulate. Memory: the datasheet lists 32GB and 16GB boards; the smaller is assumed. Host "
        "link left empty: SXM2 reaches the host through the system's PCIe Gen3 switches (or NVLink "
        "on POWER9), which the datasheet does not fix.",
        memory_gb=16,
    ),
    Datasheet(
        "NVIDIA Tesla V100 PCIe",
        ("v100", "pcie"),
        {"fp32": 14.0, "fp16": 112.0},
        0.9,
        _PCIE3_X16,
        _V100,
        "Volta has FP16 tensor cores only (no TF32, no bf16, no sparsity). Memory: the datasheet lists "
        "32GB and 16GB boards; the smaller is assumed. PCIe 3.0 x16.",
        memory_gb=16,
    ),
    Datasheet(
        "NVIDIA A100 80GB PCIe",
        ("a100", "80gb", "pcie"),
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        1.935,
        _PCIE4_X16,
        _A100,
        "Same peaks as SXM4 on the datasheet, at a lower power limit (300 W). No FP8 units; INT8 624 "
        "TOPS dense (1,248 sparse). PCIe 4.0 x16.",
        memory_gb=80,
    ),
    Datasheet(
        "NVIDIA A100 80GB SXM4",
        ("a100", "80gb"),
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        2.039,
        _PCIE4_X16,
        _A100,
        "HBM2e. No FP8 units; INT8 624 TOPS dense (1,248 sparse). Host link is the SXM4 module's "
        "PCIe 4.0 x16.",
        exclude=("pcie",),
        memory_gb=80,
    ),
    Datasheet(
        "NVIDIA A100 40GB (SXM4 or PCIe)",
        ("a100", "40gb"),
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        1.555,
        _PCIE4_X16,
        _A100,
        "HBM2; the datasheet gives the 40GB SXM4 and PCIe parts the same peaks and bandwidth "
        "(the PCIe card at 250 W may not sustain them). No FP8 units; INT8 624 TOPS dense (1,248 "
        "sparse). PCIe 4.0 x16.",
        memory_gb=40,
    ),
    Datasheet(
        "NVIDIA H100 PCIe",
        ("h100", "pcie"),
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "int8": 1513.0},
        2.0,
        _PCIE5_X16,
        _H100,
        "80GB HBM2e, 114 SMs; dense = the 2022 datasheet's sparse 756/1,513 halved; FP8 and INT8 "
        "1,513 dense (3,026 sparse). PCIe 5.0 x16.",
        memory_gb=80,
    ),
    Datasheet(
        "NVIDIA H100 NVL",
        ("h100", "nvl"),
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
        3.9,
        _PCIE5_X16,
        _H100,
        "Per GPU (one 94GB board of the NVLink-bridged pair); dense = the datasheet's sparse "
        "835/1,671 halved. PCIe 5.0 x16.",
        memory_gb=94,
    ),
    Datasheet(
        "NVIDIA H100 SXM5 80GB",
        ("h100",),
        {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1979.0, "int8": 1979.0},
        3.35,
        _PCIE5_X16,
        _H100,
        "SXM5 at boost clock; torch reports it as 'NVIDIA H100 80GB HBM3'. FP8 and INT8 1,979 dense "
        "(3,958 sparse). Host link is the module's PCIe 5.0 x16.",
        exclude=("pcie", "nvl"),
        memory_gb=80,
    ),
    Datasheet(
        "NVIDIA H200 SXM 141GB",
        ("h200",),
        {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1979.0, "int8": 1979.0},
        4.8,
        _PCIE5_X16,
        _H200,
        "Same GH100 compute as H100 SXM (datasheet: 1,979 bf16 sparse; FP8 and INT8 3,958 sparse, "
        "1,979 dense), HBM3e at 4.8 TB/s. "
        "H200 NVL (lower power) is deliberately not matched. PCIe 5.0 x16.",
        exclude=("nvl",),
        memory_gb=141,
    ),
    Datasheet(
        "NVIDIA L4",
        ("l4",),
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
        0.3,
        _PCIE4_X16,
        "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/",
        "72 W card; dense = the datasheet's sparse 120/242 halved. PCIe 4.0 x16.",
        memory_gb=24,
    ),
    Datasheet(
        "NVIDIA L40S",
        ("l40s",),
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0},
        0.864,
        _PCIE4_X16,
        "NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/",
        "bf16/fp16 is the datasheet's printed dense 362.05 (its sparse column says 733, not 724.1); "
        "FP8 733 TFLOP/s and INT8 733 TOPS dense (1,466 sparse). PCIe 4.0 x16.",
        memory_gb=48,
    ),
    Datasheet(
        "NVIDIA L40",
        ("l40",),
        {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05},
        0.864,
        _PCIE4_X16,
        "NVIDIA L40 GPU datasheet, https://www.nvidia.com/en-us/data-center/l40/",
        "Not the L40S. PCIe 4.0 x16.",
        memory_gb=48,
    ),
    Datasheet(
        "NVIDIA A10",
        ("a10",),
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
        0.6,
        _PCIE4_X16,
        "NVIDIA A10 Tensor Core GPU datasheet, "
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
        "Not the AWS A10G, whose figures differ. PCIe 4.0 x16.",
        memory_gb=24,
    ),
    Datasheet(
        "NVIDIA GeForce RTX 4090",
        ("rtx", "4090"),
        {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2},
        1.008,
        _PCIE4_X16,
        _ADA,
        "bf16/fp16 are the FP32-accumulate rates PyTorch uses (FP16-accumulate is 330.3). The "
        "4090 D and the laptop 4090 are different chips and are not matched. PCIe 4.0 x16.",
        exclude=("d", "laptop", "mobile"),
        memory_gb=24,
    ),
    Datasheet(
        "AMD Instinct MI300X",
        ("mi300x",),
        {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4},
        5.3,
        _PCIE5_X16,
        "AMD Instinct MI300X Accelerator data sheet, https://www.amd.com/content/dam/amd/en/documents/"
        "instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf",
        "fp32 vector and FP32 matrix are both 163.4. Whether PyTorch on ROCm runs TF32 (xf32) "
        "depends on the ROCm/PyTorch version. PCIe 5.0 x16.",
        memory_gb=192,
    ),
)
