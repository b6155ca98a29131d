"""The documentation site: every runnable block runs as a user would run it, and the built site's
command reference lists every command and option of the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from docs_blocks import ROOT, Block, pages
from flowrate.cli.main import cli

BIN = Path(sys.executable).parent
# pages whose blocks take more than ten seconds together on a 2-core CPU (several runs each; the
# own-model page's example is also run, with its figures checked, by test_readme.py)
SLOW_PAGES = frozenset(
    {
        "guides/own-model.md",
        "guides/comparing-history.md",
        "guides/data.md",
        "guides/report.md",
        "guides/check.md",
    }
)


def runnable(page: list[Block]) -> bool:
    return any(b.action == "run" for b in page)


def page_params() -> list[object]:
    return [
        pytest.param(name, marks=[pytest.mark.slow] if name in SLOW_PAGES else [], id=name)
        for name, page in pages().items()
        if runnable(page)
    ]


def user_env() -> dict[str, str]:
    """This environment with the installed `flowrate` first on PATH and the default store (./flowrate.db)."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWRATE_STORE"}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return env


@pytest.mark.parametrize("name", page_params())
def test_page_examples_run(name: str, tmp_path: Path) -> None:
    """A page's blocks, in order, in a directory of its own: files written, commands run, each exit 0."""
    for block in pages()[name]:
        if block.action == "file":
            (tmp_path / block.argument).write_text(block.code)
        elif block.action == "run":
            command = ["bash", "-euo", "pipefail", "-c", block.code]
            if block.language == "python":
                command = [sys.executable, "-c", block.code]
            done = subprocess.run(
                command,
                cwd=tmp_path,
                env=user_env(),
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            where = f"{block.page}:{block.line}"
            assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stderr[-3000:]}"
            assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr[-3000:]}"


def commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under the group, groups included, with its path of names."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            found += commands(sub, (*path, name))
    return found


def sections(page: str) -> dict[str, str]:
    """The built command reference split at each command's heading, by the heading's id."""
    heads = list(re.finditer(r'<h[2-6] id="(flowrate[^"]*)"', page))
    ends = [h.start() for h in heads[1:]] + [len(page)]
    return {h.group(1): page[h.end() : end] for h, end in zip(heads, ends, strict=True)}


def test_built_site_lists_every_command_and_option(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds, and its reference pages cover the CLI and the run settings."""
    site = tmp_path / "site"
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**user_env(), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reference_page = (site / "reference" / "cli" / "index.html").read_text()
    # defaults as `--help` prints them: no click sentinel leaks in (mkdocs-click's table style shows
    # click 8.3's UNSET for an option without a default)
    assert "UNSET" not in reference_page
    found = sections(reference_page)
    missing = []
    every = commands(cli)
    assert len(every) > 20
    for path, command in every:
        anchor = "-".join(("flowrate", *path))
        if anchor not in found:
            missing.append(f"command {' '.join(path) or 'flowrate'}")
            continue
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                missing += [
                    f"{anchor} {o}" for o in (*param.opts, *param.secondary_opts) if o not in found[anchor]
                ]
    assert missing == []
    from flowrate.config import RunConfig
    from flowrate.config.setting import reference

    settings = (site / "reference" / "run-settings" / "index.html").read_text()
    assert [r.field for r in reference(RunConfig) if f"<code>{r.field}</code>" not in settings] == []
    assert (site / "reference" / "api" / "index.html").read_text().count("flowrate.harness.api.benchmark") > 0
