"""--threads: one save and restore of PyTorch's CPU thread count for every run, generation,
session and calibration (flowrate.measure.device.torch_threads)."""

import pytest
import torch

from flowrate.measure.device import torch_threads


def test_the_count_holds_inside_and_comes_back_after_even_on_an_error() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), torch_threads(1):
        raise ValueError
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
