"""Prompt and output lengths from distributions (serving.lengths): exact seeded draws, and one
line naming the flag for every spec it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from flowrate.config.serve import MAX_TOKENS
from flowrate.errors import ConfigError
from flowrate.serving import lengths, prompts


def draw(text: str, n: int = 5, seed: int = 3) -> list[int]:
    return lengths.parse(text, "--input-len").draw(n, np.random.default_rng(seed))


def test_fixed_and_uniform_draw_what_numpy_draws_from_the_seed() -> None:
    assert draw("7") == [7] * 5
    expected = [int(x) for x in np.random.default_rng(3).integers(64, 257, size=5)]
    assert draw("64:256") == draw("uniform:64,256") == expected
    assert draw("uniform:64,256", seed=4) != expected


def test_normal_and_lognormal_are_rounded_and_clipped_to_at_least_one() -> None:
    raw = np.random.default_rng(3).normal(128, 16, size=5)
    assert draw("normal:128,16") == [int(x) for x in np.rint(raw)]
    assert min(draw("normal:2,50", n=200)) == 1  # half the draws are below 1: clipped
    raw = np.random.default_rng(3).lognormal(np.log(100), 0.5, size=5)
    assert draw("lognormal:100,0.5") == [int(x) for x in np.rint(raw)]
    assert np.median(draw("lognormal:100,0.5", n=4001)) == pytest.approx(100, rel=0.05)  # MEDIAN
    assert draw("normal:5,0") == [5] * 5


def test_a_file_of_lengths_a_csv_column_and_a_jsonl_field(tmp_path: Path) -> None:
    text = tmp_path / "lengths.txt"
    text.write_text("3\n9\n\n27\n")
    picks = np.random.default_rng(3).choice(np.array([3, 9, 27]), size=5)
    assert draw(f"file:{text}") == [int(x) for x in picks]
    table = tmp_path / "t.csv"
    table.write_text("prompt_len,other\n3,x\n9,y\n27,z\n")
    assert draw(f"file:{table}#prompt_len") == draw(f"file:{text}")
    rows = tmp_path / "t.jsonl"
    rows.write_text("".join(json.dumps({"n": n}) + "\n" for n in (3, 9, 27)))
    assert draw(f"file:{rows}#n") == draw(f"file:{text}")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("uniform:5,2", "LOW <= HIGH"),
        ("16:8", "LOW <= HIGH"),
        ("0", "lengths 1 to"),
        ("abc", "is not N or LOW:HIGH"),
        ("normal:abc,2", "must be numbers"),
        ("normal:128", "two numbers"),
        ("normal:nan,2", "finite"),
        ("normal:128,-1", ">= 0"),
        ("lognormal:inf,1", "finite"),
        ("lognormal:-3,1", "above 0"),
        ("lognormal:100,50", "at most 10"),
        (f"normal:{MAX_TOKENS + 1},1", f"at most {MAX_TOKENS}"),
        ("pareto:1,2", "expected N, LOW:HIGH"),
        ("file:/no/such/lengths.txt", "No such file"),
    ],
)
def test_a_spec_it_cannot_use_names_the_flag(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        lengths.parse(spec, "--output-len")
    assert caught.value.field == "--output-len"


@pytest.mark.parametrize(
    ("content", "column", "says"),
    [
        ("3\n-1\n", "", "whole numbers from 1"),
        ("3\n2.5\n", "", "whole numbers from 1"),
        ("", "", "no lengths in it"),
        ("a,b\n1,2\n", "#c", "no column 'c'"),
        ('{"n": true}\n', "#n", "whole numbers"),
        ("[1]\n", "#n", "whole numbers"),
    ],
)
def test_a_file_it_cannot_use_names_the_flag(tmp_path: Path, content: str, column: str, says: str) -> None:
    path = tmp_path / ("t.csv" if column == "#c" else "t.jsonl" if column else "t.txt")
    path.write_text(content)
    with pytest.raises(ConfigError, match=says):
        lengths.parse(f"file:{path}{column}", "--input-len")


def test_synthetic_prompts_ask_for_the_drawn_lengths() -> None:
    made = prompts.synthetic(4, lengths.parse("normal:20,5", "x"), lengths.parse("3", "x"), None, seed=1)
    rng = np.random.default_rng(1)
    assert [p.asked for p in made] == [int(x) for x in np.rint(rng.normal(20, 5, size=4))]
    assert all(p.max_tokens == 3 for p in made)
