"""A side of a comparison as a git revision: its source, cached, run in processes of its own.

flowrate is pure Python, so a revision's environment is its source tree: the commit's files
(`git archive`, which leaves the repository's state alone) under <cache>/revs/<sha>, put first
on the PYTHONPATH of the processes that run it, with this environment's packages (torch and the
rest) under it. torch is reused, nothing is built or downloaded, and a commit is extracted once.
A revision "builds" when its command line imports there; if it does not, its output is kept in
install.log and the error names the revision and the log. The cache is $FLOWRATE_CACHE (else
~/.cache/flowrate), as for compiled steps.

Each run is `python -m flowrate run … --json` of the revision's own code, in a fresh process; its
result comes back as JSON and is read by this checkout's schema (flowrate.results.schema), so a
revision whose results this code cannot read is said to be so, naming it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from flowrate.campaigns.process.child import ERROR, ChildOutcome
from flowrate.errors import FlowrateError
from flowrate.execution.compile import cache_root
from flowrate.results.environment import Software
from flowrate.results.schema import Result

LOG = "install.log"
_READY = "ready"
# what a revision must import for its runs to start: the command line and the harness
_CHECK = "import flowrate, flowrate.__main__, flowrate.harness.api; print(flowrate.__file__)"


@dataclass(frozen=True)
class Revision:
    name: str  # as the user gave it: main, HEAD~3, a tag, a sha
    sha: str
    source: Path  # the folder that holds the revision's flowrate package, first on PYTHONPATH

    @property
    def short(self) -> str:
        return self.sha[:12]


def prepare(name: str, repository: Path | None = None) -> Revision:
    """The revision ``name`` of the git repository at ``repository`` (the current folder when
    None), extracted and checked once; FlowrateError (one line) when it is no commit or does
    not build."""
    repository = repository or Path.cwd()
    sha = _commit(name, repository)
    home = cache_root() / "revs" / sha
    if (home / _READY).exists():
        return Revision(name, sha, _package_root(home / "tree"))
    if home.exists():  # an earlier attempt that did not finish or did not build: start afresh
        shutil.rmtree(home)
    home.mkdir(parents=True)
    _extract(sha, repository, home / "tree")
    revision = Revision(name, sha, _package_root(home / "tree"))
    checked = subprocess.run(
        [sys.executable, "-c", _CHECK],
        env=_environment(revision),
        capture_output=True,
        text=True,
        check=False,
    )
    log = home / LOG
    log.write_text(f"$ python -c {_CHECK!r}\n{checked.stdout}{checked.stderr}")
    imported = Path(checked.stdout.strip() or "/").resolve()
    if checked.returncode != 0 or not imported.is_relative_to(home.resolve()):
        raise FlowrateError(f"revision {name} ({revision.short}) does not build: see {log}")
    (home / _READY).write_text(sha + "\n")
    return revision


def run_at(revision: Revision, arguments: list[str]) -> ChildOutcome:
    """`flowrate run ARGUMENTS` at ``revision`` in a fresh process: its Result, or why it failed."""
    command = [sys.executable, "-m", "flowrate", "run", *arguments, "--json", "--no-store", "--quiet"]
    done = subprocess.run(command, env=_environment(revision), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return ChildOutcome(None, ERROR, lines[-1] if lines else f"exit code {done.returncode}")
    try:
        result = Result.from_json(done.stdout)
    except FlowrateError as unreadable:
        return ChildOutcome(None, ERROR, f"its result cannot be read by this flowrate: {unreadable}")
    # the revision's tree is no git checkout, so its run could not say which commit it ran: this
    # one, exactly (what history orders runs by)
    env = result.environment
    software = dataclasses.replace(env.flowrate or Software(), commit=revision.sha, dirty=False)
    return ChildOutcome(dataclasses.replace(result, environment=dataclasses.replace(env, flowrate=software)))


def _commit(name: str, repository: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(repository), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise FlowrateError(f"--rev: {name!r} is not a commit of the git repository at {repository}")
    return found.stdout.strip()


def _extract(sha: str, repository: Path, into: Path) -> None:
    """The commit's files into ``into`` (git archive: no worktree, no change to the repository)."""
    into.mkdir()
    archive = subprocess.Popen(
        ["git", "-C", str(repository), "archive", "--format=tar", sha], stdout=subprocess.PIPE
    )
    assert archive.stdout is not None
    with tarfile.open(fileobj=archive.stdout, mode="r|") as files:
        files.extractall(into, filter="data")
    if archive.wait() != 0:
        raise FlowrateError(f"--rev: git archive of {sha[:12]} failed (exit code {archive.returncode})")


def _package_root(tree: Path) -> Path:
    """Where the flowrate package sits in a revision's tree: src/ (this layout) or the top."""
    return tree / "src" if (tree / "src" / "flowrate").is_dir() else tree


def _environment(revision: Revision) -> dict[str, str]:
    earlier = os.environ.get("PYTHONPATH")
    path = str(revision.source) + (os.pathsep + earlier if earlier else "")
    return {**os.environ, "PYTHONPATH": path}
