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
