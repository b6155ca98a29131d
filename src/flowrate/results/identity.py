"""What a record measured: its kind, and the fields that make "the same configuration" for that kind.

A run, a `flowrate check`, a generation and a serving load test all produce a Result, but their
figures answer different questions: samples/s of a training step, sequences/s of a generation at
a prompt and output length, requests/s a server completed under an offered load. Two records are
repeats of one configuration (their spread is noise, `compare` may call a difference, a plot may
draw them as one point) only when they are of one kind and agree on the kind's workload:

- run and check: the problem (name, size, mode, shape) — the configuration fields (batch size,
  precision, execution, …) are compared on top, by flowrate.results.compare;
- generate: the prompt length and the new tokens each generation produced (the batch size is a
  configuration field already);
- serve: the server (URL, endpoint, model, and what it runs on where the user said so) and the
  load offered (scenario, request rate or concurrency, burstiness, ramp-up, the input and output
  lengths asked for, or the dataset or replay file they came from, and a conversation's turns
  and think time).

Every reader that groups records — noise, compare, history, pareto, the oracle view, plots and
the report — takes its grouping from here, so that no two of them can disagree on it.
"""

from __future__ import annotations

import math
from typing import Any

from flowrate.results.schema import Result
from flowrate.results.sections import Generation, Kind
from flowrate.results.serving import Serving, length_spec

# serving section fields that fix the load offered and the server it was offered to
SERVING_WORKLOAD = (
    "url",
    "endpoint",
    "model",
    "server_device",
    "scenario",
    "rate",
    "concurrency",
    "burstiness",
    "arrivals",
    "ramp_up_s",
    "input_len",
    "output_len",
    "shared_prefix_len",
    "prefix_groups",
    "dataset",
    "replay",
    "turns",
    "think_time_s",
)
# generation section fields that fix the work of one generation
GENERATION_WORKLOAD = ("prompt_len", "new_tokens", "prefill_logits")


def is_workload_field(name: str) -> bool:
    """Whether a field of compare's problem identity is the kind or the kind's workload (a
    mismatch in one is "different workloads", not "different problems"); "rate (within A)" too."""
    return name.split(" ", 1)[0] in {"kind", *SERVING_WORKLOAD, *GENERATION_WORKLOAD}


def kind_of(result: Result) -> Kind:
    """The record's kind (a record before version 7 took it from its sections: migrate)."""
    return result.kind


def workload(result: Result) -> dict[str, Any]:
    """The fields besides the problem that a record of this kind must share with another for the
    two to measure the same thing (module docstring); empty for runs and checks."""
    kind = kind_of(result)
    if kind is Kind.SERVE:
        section = result.serving or Serving()
        found = {key: getattr(section, key) for key in SERVING_WORKLOAD}
        for key in ("input_len", "output_len"):  # one spelling of each distribution
            found[key] = length_spec(found[key])
        if found["arrivals"] is None:  # recorded before --arrivals: random gaps, gamma-shaped
            found["arrivals"] = "poisson" if found["burstiness"] in (None, 1, 1.0) else "gamma"
        return found
    if kind is Kind.GENERATE:
        generation = result.generation or Generation()
        return {
            "prompt_len": generation.prompt_len,
            "new_tokens": generation.new_tokens,
            "prefill_logits": generation.prefill_logits or "all",  # recorded before: every position
        }
    return {}


def load_label(result: Result) -> str:
    """What a serving record's figures were measured under, for captions and row labels:
    '2 req/s', 'concurrency 4', 'max rate', with burstiness and lengths where set; a generation's
    lengths; '' for runs and checks."""
    kind = kind_of(result)
    if kind is Kind.GENERATE:
        generation = result.generation or Generation()
        lengths = f"prompt {generation.prompt_len}, {generation.new_tokens} new"
        return f"batch {result.batch_size}, {lengths}"
    if kind is not Kind.SERVE:
        return ""
    section = result.serving or Serving()
    rate, concurrency = section.rate, section.concurrency
    if concurrency is not None:
        parts = [f"concurrency {concurrency}"]
    elif rate == "inf" or (isinstance(rate, float) and math.isinf(rate)):
        parts = ["max rate"]
    elif isinstance(rate, int | float):
        parts = [f"{rate:g} req/s" + (" constant" if section.arrivals == "constant" else "")]
    else:
        parts = [str(section.scenario or "load ?")]
    burstiness = section.burstiness
    if isinstance(burstiness, int | float) and burstiness != 1 and concurrency is None:
        parts.append(f"burstiness {burstiness:g}")
    if section.replay:
        parts.append(f"replay {section.replay}")
    elif section.dataset:
        parts.append(f"dataset {section.dataset}")
    elif section.input_len is not None:
        parts.append(f"in {length_spec(section.input_len)} / out {length_spec(section.output_len)} tokens")
    if section.turns:
        parts.append(f"{section.turns} turns")
    return ", ".join(parts)


def family(result: Result) -> str:
    """The records a plot panel or a ranking holds together: the problem ('family/size' as the store
    lists it) for runs and checks, qualified by the kind for generations and by the server for
    serving; a figure is compared only with figures of its own family."""
    name = result.problem.name or result.config.problem or "?"
    size = result.problem.size
    label = f"{name}/{size}" if size else str(name)
    kind = kind_of(result)
    if kind is Kind.GENERATE:
        return f"{label} (generate)"
    if kind is Kind.SERVE:
        section = result.serving or Serving()
        where = section.url or "?"
        device = section.server_device
        return f"{label} at {where}" + (f" on {device}" if device else "")
    return label
