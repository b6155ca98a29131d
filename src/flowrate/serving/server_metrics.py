"""--server-metrics: the server's own Prometheus figures, scraped just before the load's first
request and just after its last, recorded beside the client's.

vLLM, SGLang and TGI serve the Prometheus text format at /metrics. Of its families those whose
names speak of queue time, time to first token or KV/prefix-cache use are kept (KEYWORDS): for a
counter its increase, for a histogram or summary the increase of its count and sum and their
ratio (the mean of the observations made during the load, in the family's unit, seconds for
the engines above), for a gauge its value before and after. Series with different labels are
summed (counters, histograms) or their largest value kept (gauges). The probe, the prompt
calibration and --warmup's requests come before the first scrape, so they are not in the deltas.
A server without /metrics, or with one that cannot be parsed, gets a warning; the run goes on.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

KEYWORDS = ("queue", "time_to_first_token", "ttft", "cache_usage", "token_usage", "kv_cache", "prefix_cache")
MAX_BYTES = 16 << 20  # a /metrics page longer than this is not read


@dataclass
class Snapshot:
    """One scrape: each kept family's type and its values (see ``_values``)."""

    types: dict[str, str] = field(default_factory=dict)
    values: dict[str, dict[str, float]] = field(default_factory=dict)


def parse(text: str) -> Snapshot:
    """The kept families of a Prometheus text page (ValueError when it is not one)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = Snapshot()
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created") or not any(word in family.name.lower() for word in KEYWORDS):
            continue  # _created: a counter's creation time, not a figure
        values: dict[str, float] = {}
        for sample in family.samples:
            suffix = sample.name[len(family.name) :]
            if suffix not in ("", "_total", "_sum", "_count") or not math.isfinite(sample.value):
                continue
            key = suffix.strip("_") or "value"
            key = "value" if key == "total" else key
            combine = max if family.type == "gauge" else (lambda a, b: a + b)
            values[key] = combine(values[key], sample.value) if key in values else sample.value
        if values:
            out.types[family.name] = family.type
            out.values[family.name] = values
    return out


def scrape(base_url: str, timeout_s: float) -> Snapshot | str:
    """The server's /metrics, parsed; or why it could not be read (a warning's reason)."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            raw = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as error:
        return f"{url} answered HTTP {error.code}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        return f"{url} could not be read ({getattr(error, 'reason', None) or error})"
    if len(raw) > MAX_BYTES:
        return f"{url} is longer than {MAX_BYTES >> 20} MiB"
    try:
        return parse(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, IndexError, TypeError) as error:
        return f"{url} is not Prometheus text ({str(error)[:80] or type(error).__name__})"


def record(before: Snapshot | str | None, after: Snapshot | str | None) -> dict[str, Any]:
    """The serving section's server_metrics: each family kept in both scrapes, or why none."""
    if isinstance(before, str) or isinstance(after, str) or before is None or after is None:
        reason = next((s for s in (before, after) if isinstance(s, str)), "the load did not finish")
        return {"available": False, "reason": reason}
    families: dict[str, Any] = {}
    for name, kind in after.types.items():
        old, new = before.values.get(name), after.values[name]
        if old is None:
            continue
        if kind == "gauge":
            families[name] = {"type": kind, "before": old.get("value"), "after": new.get("value")}
        elif "count" in new:
            count = new["count"] - old.get("count", 0.0)
            total = new.get("sum", 0.0) - old.get("sum", 0.0)
            families[name] = {
                "type": kind,
                "count": count,
                "sum": total,
                "mean": total / count if count else None,
            }
        elif "value" in new:
            families[name] = {"type": kind, "increase": new["value"] - old.get("value", 0.0)}
    return {"available": True, "families": families}
