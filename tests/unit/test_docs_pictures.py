"""The site's pictures: its pages embed exactly the pictures docs/pictures.py makes, where the
script says they go, and every picture a page embeds is a file there (a small PNG)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from docs_blocks import DOCS

PICTURES = DOCS / "assets" / "pictures"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")  # ![alt](target), with { attributes } after it
LARGEST = 250_000  # bytes: a screenshot past this wants a smaller viewport or fewer colours


def pictures_script() -> ModuleType:
    """docs/pictures.py, imported (it is a script, not a module of a package); it imports only the
    standard library until it runs."""
    spec = importlib.util.spec_from_file_location("docs_pictures", DOCS / "pictures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def images(text: str) -> list[str]:
    return IMAGE.findall(text)


def embedded() -> dict[str, set[Path]]:
    """Each page (relative to docs/) with the local files its images point at, resolved."""
    found: dict[str, set[Path]] = {}
    for path in sorted(DOCS.rglob("*.md")):
        targets = {(path.parent / t).resolve() for t in images(path.read_text()) if "://" not in t}
        if targets:
            found[str(path.relative_to(DOCS))] = targets
    return found


def test_images_are_read_with_their_attributes_after_them() -> None:
    text = '![a plot](../assets/pictures/p.png){ width="720" } and ![x](y.svg) but not [link](z.md)'
    assert images(text) == ["../assets/pictures/p.png", "y.svg"]


def test_the_pages_embed_exactly_the_pictures_the_script_makes() -> None:
    script = pictures_script()
    promised = {(page, picture.name) for picture in script.PICTURES for page in picture.pages}
    shown = {
        (page, target.name)
        for page, targets in embedded().items()
        for target in targets
        if target.parent == PICTURES.resolve()
    }
    assert shown == promised
    assert script.OUT.resolve() == PICTURES.resolve()


def test_every_embedded_picture_exists_and_is_a_small_png() -> None:
    missing = [f"{page}: {t}" for page, targets in embedded().items() for t in targets if not t.is_file()]
    assert missing == []
    names = [picture.name for picture in pictures_script().PICTURES]
    # nothing lies there that the script does not make
    assert sorted(p.name for p in PICTURES.iterdir()) == sorted(names)
    for name in names:
        data = (PICTURES / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        assert len(data) < LARGEST, f"{name}: {len(data)} bytes"
