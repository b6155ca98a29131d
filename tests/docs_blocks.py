"""The code blocks of the documentation site (docs/) and what each says should happen to it.

A fenced block is preceded, on the line before its fence, by one marker:

- ``<!-- run -->``: a ``bash`` block runs in bash, a ``python`` block in Python, in the page's own
  working directory, in page order;
- ``<!-- file: NAME -->``: the block is written to NAME in that directory before later blocks run;
- ``<!-- not-run: REASON -->``: shown only; REASON says why (a GPU, minutes, a server).

Blocks of shown output (``text``) carry no marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
UNMARKED_LANGUAGES = frozenset({"text"})
RUNNABLE_LANGUAGES = frozenset({"bash", "python"})
_FENCE = re.compile(r"^```([\w-]*)\s*$")
_MARKER = re.compile(r"^<!-- (run|file: (?P<file>\S+)|not-run: (?P<reason>.*\S)) -->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    line: int  # of the opening fence, 1-based
    language: str
    action: str  # "run", "file", "not-run", or "" for a block without a marker
    argument: str  # the file's name, or the reason it is not run
    code: str


def blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of one page, with the marker on the line before it."""
    lines = text.splitlines()
    found, index = [], 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page}:{index + 1}: a code block that is never closed")
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        action, argument = "", ""
        if marker is not None:
            action = marker.group(1).split(":")[0]
            argument = marker.group("file") or marker.group("reason") or ""
        code = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Block(page, index + 1, fence.group(1), action, argument, code))
        index = end + 1
    return found


def problems(block: Block) -> list[str]:
    """What is wrong with a block's marking: empty when it is run, written or says why not."""
    where = f"{block.page}:{block.line}"
    if block.language in UNMARKED_LANGUAGES:
        return [f"{where}: a {block.language} block takes no marker"] if block.action else []
    if not block.action:
        return [
            f"{where}: a {block.language or 'plain'} block with no <!-- run -->, <!-- file: NAME --> "
            "or <!-- not-run: REASON --> before it (shown output is a text block)"
        ]
    if block.action == "run" and block.language not in RUNNABLE_LANGUAGES:
        return [f"{where}: only bash and python blocks run, not {block.language or 'plain'}"]
    return []


def pages() -> dict[str, list[Block]]:
    """Every page of the site with its blocks, by path relative to docs/."""
    found = {}
    for path in sorted(DOCS.rglob("*.md")):
        page = str(path.relative_to(DOCS))
        found[page] = blocks(page, path.read_text())
    return found
