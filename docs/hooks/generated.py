"""MkDocs hook: tables generated from the code, put where a page says `<!-- generated: NAME -->`.

Nothing is written into the repository: each table is made while the page is built, from the
same definitions the CLI and the library use (the run settings, the metrics, the Result's fields,
the import-linter layers in pyproject.toml).
"""

from __future__ import annotations

import ast
import dataclasses
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
    """Every RunConfig setting: its flags and field, its values (type, default, bounds, unit), what
    it means, and whether a sweep can vary it."""
    from flowrate.config import RunConfig
    from flowrate.config.setting import reference

    rows = []
    for r in reference(RunConfig):
        flags = ", ".join(f"`{f.strip()}`" for f in r.flags.split(",")) if r.flags else "(Python only)"
        value = [r.type, f"default: {r.default}" if r.default else ""]
        value.append(" ".join(part for part in (r.bounds, r.unit) if part))
        rows.append([f"{flags}<br>`{r.field}`", "<br>".join(v for v in value if v), r.help, r.sweepable])
    return _table(["flags and field", "value", "meaning", "sweep"], rows)


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
    """The import-linter layers contract drawn as an SVG, top layer first: one box per layer, its
    packages side by side (packages in one layer do not import each other unless joined by `:`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    width, row, gap = 520, 34, 14
    height = len(contract["layers"]) * (row + gap)
    parts = [
        f'<svg class="layers" role="img" aria-label="flowrate\'s layers, top to bottom" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="14">'
    ]
    for index, layer in enumerate(contract["layers"]):
        y = index * (row + gap)
        names = [p.strip() for p in re.split(r"[|:]", layer)]
        joiner = " : " if ":" in layer else "  |  "
        parts.append(
            f'<rect x="60" y="{y}" width="{width - 120}" height="{row}" rx="6" '
            'fill="#e8eaf6" stroke="#3f51b5"/>'
            f'<text x="{width // 2}" y="{y + row // 2 + 5}" text-anchor="middle">{joiner.join(names)}</text>'
        )
        if index + 1 < len(contract["layers"]):
            x, y0, y1 = width // 2, y + row, y + row + gap
            parts.append(
                f'<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1 - 3}" stroke="#3f51b5" stroke-width="2"/>'
                f'<polygon points="{x - 5},{y1 - 7} {x + 5},{y1 - 7} {x},{y1}" fill="#3f51b5"/>'
            )
    parts.append("</svg>")
    return "".join(parts)


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
