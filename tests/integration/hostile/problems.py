"""User problem files for the user-code cases: one problem whose methods misbehave on request
(each factory names a misbehaviour), other files written as given, and the README's example."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hostile.case import Setup, Workspace

USER_PROBLEM = textwrap.dedent("""
    import sys

    import torch
    from torch import nn

    import flowrate


    class Misbehaving(flowrate.Problem):
        name = "misbehaving"
        default_batch_size = 4

        def __init__(self, how=None):
            self.how = how

        def build_model(self):
            if self.how == "build_raises":
                raise RuntimeError("the model cannot be built")  # LINE:build_raises
            if self.how == "build_exits":
                sys.exit(0)  # LINE:build_exits
            if self.how == "build_not_module":
                return 42
            return nn.Sequential(nn.Linear(4, 3))

        def make_batch(self, batch_size, device, generator):
            if self.how == "batch_raises":
                raise ValueError("no batch today")  # LINE:batch_raises
            x = torch.randn(batch_size, 4, device=device, generator=generator)
            return x, torch.randint(0, 3, (batch_size,), device=device, generator=generator)

        def loss(self, model, batch):
            x, y = batch
            out = model(x)
            if self.how == "loss_raises":
                raise KeyError("label")  # LINE:loss_raises
            if self.how == "loss_vector":
                return nn.functional.cross_entropy(out, y, reduction="none")
            if self.how == "loss_string":
                return "low"
            if self.how == "loss_none":
                return None
            if self.how == "loss_shapes":
                return (out @ torch.zeros(7, 2)).mean()  # LINE:loss_shapes
            if self.how == "loss_exits":
                sys.exit(0)  # LINE:loss_exits
            if self.how == "loss_recursion":
                return self.loss(model, batch)  # LINE:loss_recursion
            if self.how == "marked":
                open("measured", "a").close()  # the case checks no step ran
            return nn.functional.cross_entropy(out, y)

        def learnable_batch(self, batch_size, device, generator):
            return self.make_batch(batch_size, device, generator)

        def parameter_count(self):
            if self.how == "count_raises":
                raise NotImplementedError("count me later")  # LINE:count_raises
            if self.how == "count_string":
                return "many"
            return 4 * 3 + 3

        def forward_flops_per_sample(self):
            return 2 * 4 * 3

        def blocks(self, model):
            if self.how == "blocks_garbage":
                return [42]
            return list(model)


    def good():
        return Misbehaving()
""")

MISBEHAVIOURS = (
    "build_raises",
    "build_exits",
    "build_not_module",
    "batch_raises",
    "loss_raises",
    "loss_vector",
    "loss_string",
    "loss_none",
    "loss_shapes",
    "loss_exits",
    "loss_recursion",
    "count_raises",
    "count_string",
    "blocks_garbage",
    "marked",
)
USER_FILE = "misbehaving.py"


def user_source() -> str:
    factories = "".join(f"\n\ndef {how}():\n    return Misbehaving({how!r})\n" for how in MISBEHAVIOURS)
    return USER_PROBLEM + factories


def user_line(how: str) -> str:
    """`misbehaving.py:N`: where the misbehaviour is, as the one-line error should name it."""
    for number, line in enumerate(user_source().splitlines(), start=1):
        if line.endswith(f"# LINE:{how}"):
            return f"{USER_FILE}:{number}"
    raise KeyError(how)


def user_problem(ws: Workspace) -> None:
    ws.path("user", USER_FILE).write_text(user_source())


def user_file(name: str, text: str | bytes, mode: int | None = None) -> Setup:
    """A problem file `name` (path name: its stem) with this source."""

    def setup(ws: Workspace) -> None:
        path = ws.path(Path(name).stem, name)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))
        if mode is not None:
            path.chmod(mode)

    return setup


def readme_example(ws: Workspace) -> None:
    """The own-model guide's my_model.py (docs/guides/own-model.md), exactly as printed there."""
    guide = (Path(__file__).parents[3] / "docs" / "guides" / "own-model.md").read_text()
    start = guide.index("<!-- file: my_model.py -->")
    code = guide[start:].split("```python\n", 1)[1].split("```", 1)[0]
    ws.path("my_model", "my_model.py").write_text(code)
