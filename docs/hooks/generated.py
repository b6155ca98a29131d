"""MkDocs hook: tables generated from the code, put where a page says `<!-- generated: NAME -->`.

Nothing is written into the repository: each table is made while the page is built, from the
same definitions the CLI and the library use (the run settings, the metrics, the Result's fields,
the import-linter layers in pyproject.toml).
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def run_settings() -> str:
    """Every RunConfig setting: its flags, type, default, bounds, unit, help and sweepability."""
    from flowrate.config import RunConfig
    from flowrate.config.setting import reference

    rows = [
        [
            f"`{r.field}`",
            f"`{r.flags}`" if r.flags else "",
            r.type,
            r.default,
            r.bounds,
            r.unit,
            r.help,
            r.sweepable,
        ]
        for r in reference(RunConfig)
    ]
    return _table(["field", "flags", "type", "default", "bounds", "unit", "meaning", "sweepable"], rows)


def metrics() -> str:
    """The figures runs are listed, compared, plotted and ranked by (results/metrics.py)."""
    from flowrate.results.metrics import METRICS

    rows = [
        [
            f"`{m.name}`",
            m.label,
            m.unit or "—",
            "higher" if m.higher_is_better else "lower",
            "yes" if m.per_interval is not None else "no",
        ]
        for m in METRICS.values()
    ]
    return _table(["metric", "label", "unit", "better", "per interval"], rows)


def _type_text(kind: object) -> str:
    text = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
    return re.sub(r"\b(?:[a-z_]+\.)+", "", str(text)).replace("NoneType", "None")


def result_fields() -> str:
    """The Result's top-level fields with their types, in the order they are written."""
    from flowrate.results.schema import Result

    hints = typing.get_type_hints(Result)
    rows = [[f"`{f.name}`", f"`{_type_text(hints.get(f.name, f.type))}`"] for f in dataclasses.fields(Result)]
    return _table(["field", "type"], rows)


def layers() -> str:
    """The import-linter layers contract drawn as a mermaid flowchart, top layer first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    lines = ["```mermaid", "flowchart TD"]
    names = []
    for index, layer in enumerate(contract["layers"]):
        parts = [p.strip() for p in re.split(r"[|:]", layer)]
        name = f"L{index}"
        names.append(name)
        lines.append(f'    {name}["{" · ".join(parts)}"]')
    lines += [f"    {a} --> {b}" for a, b in itertools.pairwise(names)]
    lines.append("```")
    return "\n".join(lines)


def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring, read without importing it."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def packages() -> str:
    """Each package or module of a layer, top layer first: what its docstring says and its modules."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    source = ROOT / "src" / "flowrate"
    rows = []
    for layer in contract["layers"]:
        for name in (p.strip() for p in re.split(r"[|:]", layer)):
            folder = source / name
            if folder.is_dir():
                modules = sorted(
                    str(m.relative_to(folder).with_suffix(""))
                    for m in folder.rglob("*.py")
                    if m.name != "__init__.py"
                )
                rows.append([f"`{name}/`", _summary(folder / "__init__.py"), ", ".join(modules)])
            else:
                rows.append([f"`{name}.py`", _summary(source / f"{name}.py"), ""])
    return _table(["package", "what it does", "modules"], rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "run-settings": run_settings,
    "metrics": metrics,
    "result-fields": result_fields,
    "layers": layers,
    "packages": packages,
}


def expand(markdown: str) -> str:
    """The page with each marker replaced by its generated table (an unknown name is an error)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"docs: no generator named {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    return expand(markdown)
