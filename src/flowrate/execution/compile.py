"""torch.compile with a cache that outlives the process: `flowrate compile` and `run --compile`.

The step's loss function is compiled (``ResidentExecutor(compile=True)``: forward and loss, and
through AOTAutograd the backward), and inductor keeps what it compiled — the FX graph cache, the
AOTAutograd cache and the generated kernels — under ``TORCHINDUCTOR_CACHE_DIR``, which flowrate
points at one folder per configuration:

    $FLOWRATE_CACHE (else $XDG_CACHE_HOME/flowrate, else ~/.cache/flowrate)
      compile/<key>/inductor/            inductor's caches for this configuration
      compile/<key>/manifest.json        the configuration, the software versions, compile seconds
      compile/<key>/compile_report.txt   and .json: the compile report (flowrate compile)

The key hashes what the compiled graphs depend on: problem, size and shape options, mode, batch
size, precision, optimizer, execution mode, device name, and the versions of torch, Python and
flowrate. A second start of the same configuration finds the graphs and kernels on disk (an
``fxgraph_cache_hit`` in ``torch._dynamo.utils.counters``) and skips inductor's code generation
and C++/Triton compilation; Dynamo still traces the Python (seconds, not tens of seconds).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from flowrate._version import __version__
from flowrate.config import RunConfig
from flowrate.problems.base import Batch

CACHE_ENV = "FLOWRATE_CACHE"
MANIFEST = "manifest.json"
# What the compiled graphs depend on, of a RunConfig's fields.
KEY_FIELDS = (
    "problem",
    "size",
    "problem_options",
    "mode",
    "precision",
    "optimizer",
    "execution",
    "recompute",
)
# torch._dynamo.utils.counters entries that say whether inductor's caches were hit.
_COUNTERS = (
    ("inductor", "fxgraph_cache_hit"),
    ("inductor", "fxgraph_cache_miss"),
    ("aot_autograd", "autograd_cache_hit"),
    ("aot_autograd", "autograd_cache_miss"),
)


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "flowrate"


def cache_key(config: RunConfig, batch_size: int | str, device_name: str) -> tuple[str, dict[str, Any]]:
    """A short hash of what the compiled step depends on, and the description it hashes."""
    settings = config.to_dict()
    described = {
        "config": {name: settings[name] for name in KEY_FIELDS},
        "batch_size": batch_size,
        "device": device_name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "flowrate": __version__,
    }
    digest = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
    return digest[:16], described


def entry_dir(key: str) -> Path:
    return cache_root() / "compile" / key


@dataclass(frozen=True)
class CacheEntry:
    """One configuration's folder in the compile cache."""

    key: str
    directory: Path
    described: dict[str, Any]  # what the key hashes


def cache_entry(config: RunConfig, batch_size: int | str, device_name: str) -> CacheEntry:
    key, described = cache_key(config, batch_size, device_name)
    return CacheEntry(key, entry_dir(key), described)


def open_cache(
    stack: contextlib.ExitStack, config: RunConfig, batch_size: int | str, device_name: str
) -> CacheEntry | None:
    """With --compile, enter the configuration's compile cache on ``stack``; else None."""
    if not config.compile:
        return None
    entry = cache_entry(config, batch_size, device_name)
    stack.enter_context(compile_cache(entry.directory / "inductor"))
    return entry


@contextlib.contextmanager
def compile_cache(directory: Path) -> Iterator[None]:
    """Point inductor's caches (FX graph, AOTAutograd, kernels) at ``directory``, switched on, for
    the duration; the process's in-memory caches are cleared on the way in and out, so what is
    found was found on disk."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    directory.mkdir(parents=True, exist_ok=True)
    torch._dynamo.reset()
    with (
        temporary_cache_dir(str(directory)),
        inductor_config.patch(fx_graph_cache=True),
        functorch_config.patch(enable_autograd_cache=True),
    ):
        yield


def cache_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {name: int(counters[group][name]) for group, name in _COUNTERS}


@dataclass(frozen=True)
class CompileRecord:
    """The first compiled step: how long it took and whether inductor's caches were hit."""

    compile_s: float  # the first step's seconds (tracing and compiling, then running once)
    cache_hits: int  # FX graphs and AOTAutograd entries found on disk
    cache_misses: int  # compiled afresh (and saved)
    directory: str

    @property
    def cache_hit(self) -> bool:
        return self.cache_hits > 0 and self.cache_misses == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cache_hit": self.cache_hit}


def first_step(
    step: Callable[[Batch], torch.Tensor], batch: Batch, sync: Callable[[], None], entry: CacheEntry
) -> CompileRecord:
    """Run the compiled step once, timing it (torch.compile compiles on the first call), and add
    the compile to the entry's manifest."""
    before = cache_counters()
    start = time.perf_counter()
    step(batch)
    sync()
    seconds = time.perf_counter() - start
    after = cache_counters()
    delta = {name: after[name] - before[name] for name in after}
    record = CompileRecord(
        compile_s=seconds,
        cache_hits=delta["fxgraph_cache_hit"] + delta["autograd_cache_hit"],
        cache_misses=delta["fxgraph_cache_miss"] + delta["autograd_cache_miss"],
        directory=str(entry.directory),
    )
    write_manifest(entry, record)
    return record


def write_manifest(entry: CacheEntry, record: CompileRecord) -> Path:
    """The entry's manifest: what it compiles, with which software, and every compile's time."""
    from flowrate.io import write_atomic

    path = entry.directory / MANIFEST
    history = read_manifest(entry.directory).get("compiles", [])
    data = {"key": entry.key, **entry.described, "compiles": [*history, {**record.to_dict(), "at": _now()}]}
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    return path


def read_manifest(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
