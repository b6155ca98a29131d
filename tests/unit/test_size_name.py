"""A size is "+custom" only when the options change it: options that repeat the size's own values,
or give exactly another named size's, keep a name the reader knows."""

from __future__ import annotations

from flowrate.problems.registry import get_problem, size_name


def test_options_that_repeat_the_sizes_values_keep_its_name() -> None:
    assert get_problem("transformer", size="debug", options={"layers": 2}).size == "debug"
    assert get_problem("transformer", size="debug", options={"layers": 3}).size == "debug+custom"


def test_options_that_give_another_named_size_take_its_name() -> None:
    sizes = {"small": (2, 64), "large": (4, 256)}
    assert size_name(sizes, "small", (4, 256)) == "large"
    assert size_name(sizes, "small", (2, 64)) == "small"
    assert size_name(sizes, "small", (3, 64)) == "small+custom"
