"""RunConfig: parsing of names, validation messages, and the dict round trip results rely on."""

import pytest

from flowrate.config import Mode, Precision, RunConfig
from flowrate.errors import ConfigError


def test_aliases_parse_to_enums() -> None:
    config = RunConfig(mode="training", precision="BF16", optimizer="SGD", batch_size="AUTO")
    assert config.mode is Mode.TRAIN and config.precision is Precision.BF16
    assert config.batch_size == "auto"
    assert RunConfig(mode="inference", precision="pure_bf16").precision is Precision.PURE_BF16
    assert RunConfig(batch_size="16").batch_size == 16


def test_dict_round_trip_is_exact() -> None:
    config = RunConfig(problem="gpt2", batch_size=4, precision="fp16", problem_options={"seq_len": 64})
    data = config.to_dict()
    assert data["precision"] == "fp16" and data["mode"] is None
    assert RunConfig.from_dict(data) == config
    assert RunConfig.from_dict({**data, "field_from_the_future": 1}) == config


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"batch_size": -1}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"preheat_steps": -1}, "preheat_steps"),
        ({"smoothing": 1.0}, "smoothing"),
        ({"duration_s": 0}, "duration_s"),
        ({"device": "cuda:x"}, "device"),
        ({"mode": "fly"}, "mode"),
        ({"problem_options": {"seq_len": -1}}, "seq_len"),
        ({"problem": ""}, "problem"),
    ],
)
def test_bad_values_name_their_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunConfig(**changes)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_zero_preheat_is_allowed() -> None:
    assert RunConfig(preheat_steps=0).preheat_steps == 0


def test_mode_settles_to_the_problems_default_and_refuses_what_it_cannot_run() -> None:
    from flowrate.config import Mode

    both = (Mode.TRAIN, Mode.INFER)
    assert RunConfig().for_problem(both, Mode.TRAIN, "gpt2").settled_mode is Mode.TRAIN
    assert RunConfig().for_problem((Mode.INFER,), Mode.INFER, "gemm").settled_mode is Mode.INFER
    with pytest.raises(ConfigError, match="gemm runs infer only; use --mode infer"):
        RunConfig(mode="train").for_problem((Mode.INFER,), Mode.INFER, "gemm")


# --- bounds (issue 14): one table for the Python API and the CLI's flags -------------------------

HUGE = 99999999999999999999999  # beyond 64 bits: the value that reached C++ frames


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"steps": HUGE}, "steps: must be at most 1000000000, got"),
        ({"min_steps": 0}, "min_steps: must be a positive integer, got 0"),
        ({"preheat_steps": 10**9 + 1}, "preheat_steps: must be at most 1000000000"),
        ({"batch_size": HUGE}, "batch_size: must be at most 2147483647 (2**31 - 1)"),
        ({"batch_size": str(HUGE)}, "batch_size: must be at most 2147483647"),
        ({"max_batch_size": 2**31}, "max_batch_size: must be at most 2147483647"),
        ({"duration_s": float("inf")}, "duration_s: must be at most 604800 s (7 days), got inf"),
        ({"duration_s": float("nan")}, "duration_s: must be a positive number, got nan"),
        ({"target_interval_s": float("inf")}, "target_interval_s: must be at most 604800"),
        ({"learning_rate": float("inf")}, "learning_rate: must be a finite number, got inf"),
        ({"clip_grad_norm": float("nan")}, "clip_grad_norm: must be a positive number, got nan"),
        ({"device_memory_limit_gib": float("inf")}, "device_memory_limit_gib: must be a finite number"),
        ({"smoothing": float("nan")}, "smoothing: must be in [0, 1), got nan"),
        ({"threads": 100_000}, "threads: must be at most 1024, got 100000"),
        ({"seed": -1}, "seed: must be an integer 0 or more, got -1"),
        ({"seed": 2**63}, "seed: must be at most 9223372036854775807 (2**63 - 1)"),
        ({"steps": 2.0}, "steps: must be a positive integer, got 2.0"),
        ({"problem_options": {"seq_len": HUGE}}, "seq_len: must be at most 2147483647"),
        ({"data_dir": "d", "loader_workers": 257}, "loader_workers: must be at most 256"),
        ({"data_dir": "d", "shuffle_buffer": 10**8 + 1}, "shuffle_buffer: must be at most 100000000"),
        ({"dist_timeout_s": float("inf")}, "dist_timeout_s: must be at most 604800"),
    ],
)
def test_numbers_beyond_their_bounds_are_refused_naming_the_bound(
    changes: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        RunConfig(**changes)  # type: ignore[arg-type]
    assert says in str(caught.value)


def test_the_bounds_themselves_are_valid() -> None:
    config = RunConfig(
        steps=10**9,
        preheat_steps=0,
        batch_size=2**31 - 1,
        duration_s=7 * 24 * 3600,
        threads=1024,
        seed=2**63 - 1,
        smoothing=0.0,
        learning_rate=1e30,  # a diverging run is a run (its loss stops it), not bad input
    )
    assert config.steps == 10**9 and config.batch_size == 2**31 - 1


def test_bounds_say_why_in_words() -> None:
    from flowrate.config import BOUNDS

    assert BOUNDS["steps"].fault(5) is None
    assert BOUNDS["steps"].fault(True) == "must be a positive integer, got True"
    assert BOUNDS["smoothing"].fault(1) == "must be in [0, 1), got 1"
    assert BOUNDS["duration_s"].fault(0.5) is None
