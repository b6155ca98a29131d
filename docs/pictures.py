"""The documentation's pictures, made from real runs: `python docs/pictures.py` makes them all again.

Into a temporary store, on this machine's CPU, it runs flowrate as a user would (the commands in
RUNS: two tiny runs, a five-point sweep of a small transformer's batch size, and
`flowrate survey --quick`), then draws each picture of PICTURES from that store: the sweep's
Pareto plot is flowrate's own PNG; the report and the survey card are HTML pages, photographed
in headless Chromium (Debian's `chromium`, driven by playwright, every request that would leave
the file blocked) and stored as 256-colour PNGs. Each is written under docs/assets/pictures/ with
its fixed name, and every command is printed before it runs.

The pages that embed a picture are named beside it in PICTURES (a test holds the pages to it).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "assets" / "pictures"
SWEEP = "docs-batches"
TINY = ("--device", "cpu", "--preheat", "1", "-q")


@dataclass(frozen=True)
class Picture:
    name: str  # the file under docs/assets/pictures/
    pages: tuple[str, ...]  # the pages that embed it, relative to docs/
    made_by: tuple[str, ...]  # the flowrate command that draws it (its output path last)


REPORT = Picture("report.png", ("getting-started.md", "guides/report.md"), ("report", "--out", "report.html"))
PARETO = Picture(
    "pareto.png",
    ("guides/report.md", "guides/sweeps-explore.md"),
    ("plot", "pareto", "--sweep", SWEEP, "--out", "pareto.png"),
)
SURVEY_CARD = Picture(
    "survey-card.png",
    ("guides/survey.md",),
    ("survey", "--quick", "--device", "cpu", "-q", "--html", "card.html"),
)
PICTURES = (REPORT, PARETO, SURVEY_CARD)

# the runs the pictures are drawn from, in order, into one store
RUNS: tuple[tuple[str, ...], ...] = (
    ("run", "-p", "fc_mnist", "--size", "debug", "--duration", "1", *TINY),
    ("run", "-p", "transformer", "--size", "mini", "--batch-size", "2", "--steps", "4", *TINY),
    ("sweep", "-p", "transformer", "--size", "mini", "--steps", "3", "-g", "batch_size=1..16",
     "--name", SWEEP, *TINY),
    SURVEY_CARD.made_by,
)  # fmt: skip

WIDTH = 1280  # CSS pixels of the browser window; the pictures are this wide
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


class PictureError(Exception):
    """A picture could not be made; the message says which step and why."""

    exit_code = 1


class MissingTool(PictureError):
    """Chromium or playwright is not installed."""

    exit_code = 2


def flowrate(args: tuple[str, ...], work: Path) -> None:
    """Run ``flowrate ARGS`` in ``work`` with this checkout's code and the store ``work/flowrate.db``."""
    print(f"$ flowrate {shlex.join(args)}", flush=True)
    env = dict(os.environ, FLOWRATE_STORE=str(work / "flowrate.db"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "flowrate", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise PictureError(f"flowrate {shlex.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")


def chromium() -> str:
    """Chromium's path, where it and playwright are installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise MissingTool("playwright is not installed (pip install -e '.[dev]')") from None
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise MissingTool("no chromium on PATH (Debian: apt-get install chromium)")
    return path


def photograph(executable: str, page_file: Path, png: Path, height: int | None = None) -> None:
    """The top of ``page_file`` (``height`` CSS pixels, or the whole page), 1280 wide, as a
    256-colour PNG at ``png``; only file: and data: requests are let through."""
    from PIL import Image
    from playwright.sync_api import Request, Route, sync_playwright

    def only_local(route: Route, request: Request) -> None:
        if request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.route("**/*", only_local)
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            full = page.evaluate("document.documentElement.scrollHeight")
            page.set_viewport_size({"width": WIDTH, "height": min(height or full, full)})
            shot = page_file.with_suffix(".png")  # beside the page, in the temporary folder
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    with Image.open(shot) as image:
        image.convert("RGB").quantize(colors=256).save(png, optimize=True)
    shot.unlink()


def make_all() -> list[Path]:
    """Every picture of PICTURES, made afresh from the runs of RUNS; the paths written."""
    executable = chromium()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flowrate-pictures-") as tmp:
        work = Path(tmp)
        for args in RUNS:
            flowrate(args, work)
        flowrate(PARETO.made_by, work)
        flowrate(REPORT.made_by, work)
        shutil.copyfile(work / PARETO.made_by[-1], OUT / PARETO.name)
        photograph(executable, work / REPORT.made_by[-1], OUT / REPORT.name, height=1400)
        photograph(executable, work / SURVEY_CARD.made_by[-1], OUT / SURVEY_CARD.name)
    return [OUT / p.name for p in PICTURES]


def main() -> int:
    try:
        written = make_all()
    except PictureError as error:
        print(f"docs/pictures.py: {error}", file=sys.stderr)
        return error.exit_code
    for path in written:
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
