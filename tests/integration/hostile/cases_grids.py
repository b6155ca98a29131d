"""Sweep files written by hand, the batch search's bounds on a CPU, and the README's placeholder
names (`--sweep sweep-1a2b3c`, `--tag nightly`) given to a store that holds other ones.

A sweep file's value is read by the rule of the flag it stands for (config/values.py): a table,
a nested array, a word, a boolean, a fraction, NaN or a size past 2**31 - 1 is exit 2 and one
line naming --file and the key (or the flag and the point), before anything runs; a file that is
not UTF-8 TOML is refused as such. The batch search's own numbers are checked the same way. A
filter naming a sweep or a tag the store does not hold says so and lists those it holds, rather
than "no runs match".
"""

from __future__ import annotations

from hostile.case import HUGE, USAGE, Case, Workspace
from hostile.setups import sweep_named

_SWEEP = ("sweep", "-p", "fc_mnist", "--size", "debug", "--steps", "2", "--preheat", "1")
_RUN = ("run", "-p", "fc_mnist", "--size", "debug", "--steps", "2", "--preheat", "1")


def _sweep_file(content: str | bytes) -> object:
    """sweep.toml ({sweep}) holding ``content``."""

    def setup(ws: Workspace) -> None:
        path = ws.path("sweep", "sweep.toml")
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def _file(label: str, content: str | bytes, *says: str) -> Case:
    """A sweep file refused before any point runs (--dry-run would list them)."""
    return Case(
        f"sweep-file-{label}",
        (*_SWEEP, "--file", "{sweep}", "--dry-run"),
        USAGE,
        says,
        setup=_sweep_file(content),  # type: ignore[arg-type]
    )


def _prices(label: str, content: str | bytes, *says: str) -> Case:
    """A --prices file refused before the run: one line naming the flag and the file's fault."""

    def setup(ws: Workspace) -> None:
        path = ws.path("sweep", "prices.toml")
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    argv = (*_RUN, "--prices", "{sweep}")
    return Case(f"prices-{label}", argv, USAGE, ("--prices", *says), setup=setup)  # type: ignore[arg-type]


_MACHINE = '[[machine]]\nhostname = "x"\n'


def _grid(values: str) -> str:
    return f"[grid]\nbatch_size = {values}\n"


def _batch(label: str, *flags: str, says: tuple[str, ...]) -> Case:
    return Case(f"batch-search-{label}", (*_RUN, *flags), USAGE, says)


CASES = [
    # --prices FILE: TOML of [[machine]] entries, each a machine key and a price above 0
    _prices("binary", bytes(range(256)), "not a TOML file", "not UTF-8"),
    _prices("not-toml", "price = [", "not valid TOML"),
    _prices("negative", _MACHINE + "price_per_hour = -1\n", "machine 1", "price_per_hour", "above 0"),
    _prices("nan", _MACHINE + "price_per_hour = nan\n", "machine 1", "price_per_hour"),
    _prices("string", _MACHINE + 'price_per_hour = "dear"\n', "machine 1", "price_per_hour"),
    _prices("unknown-key", _MACHINE + "price_per_hour = 1\nspot = 2\n", "unknown key 'spot'"),
    # [grid]: each value read as its flag reads it
    _file("grid-table", _grid("{a = 1}"), "--file", "batch_size", "{'a': 1}"),
    _file("grid-nested-array", _grid("[[1, 2]]"), "--file", "batch_size", "[1, 2]"),
    _file("grid-empty-array", _grid("[]"), "--file", "batch_size", "no values"),
    _file("grid-word", _grid('["abc"]'), "--file", "batch_size", "'abc'"),
    _file("grid-boolean", _grid("[true]"), "--file", "batch_size", "True"),
    _file("grid-fraction", _grid("[2.5]"), "--file", "batch_size", "2.5"),
    _file("grid-huge", _grid("[1, 99999999999999999999]"), "--batch-size", "at most 2147483647"),
    _file("grid-lr-nan", "[grid]\nlr = [nan]\n", "--lr", "nan"),
    _file("grid-unknown-option", "[grid]\nnosuch = [1]\n", "--file", "unknown option 'nosuch'"),
    _file("grid-not-a-table", "grid = 5\n", "--file", "grid must be a table"),
    # what one run does after it ends is not a sweep's: one line naming the flag, not "unknown"
    _file("base-profile", f'[base]\nprofile_dir = "p"\n{_grid("[2]")}', "--file", "give --profile to"),
    _file("grid-price", "[grid]\nprice_per_hour = [1.0, 2.0]\n", "--file", "give --price-per-hour to"),
    Case(
        "sweep-flag-profile",
        (*_SWEEP, "--profile", "p", "-g", "batch_size=2", "--dry-run"),
        USAGE,
        ("--profile", "applies to one run"),
    ),
    # [base] and the file's own entries
    _file("base-duration-nan", f"[base]\nduration = nan\n{_grid('[2]')}", "--duration", "nan"),
    _file("base-date", f"[base]\nseed = 1979-05-27\n{_grid('[2]')}", "--file", "seed"),
    _file("unknown-table", "[wat]\na = 1\n", "--file", "unknown entry 'wat'"),
    _file("name-empty", f'name = ""\n{_grid("[2]")}', "--file", "name must be a non-empty string"),
    _file("command-unknown", f'command = "nosuch"\n{_grid("[2]")}', "--file", "'run' or 'generate'"),
    _file("binary", b"\xff\xfe\x00" + bytes(range(256)) * 4, "--file", "not UTF-8"),
    Case(
        "sweep-file-missing",
        (*_SWEEP, "--file", "{tmp}/nosuch.toml", "--dry-run"),
        USAGE,
        ("--file", "No such file"),
    ),
    # the batch search's numbers
    _batch("max-zero", "-b", "auto", "--max-batch-size", "0", says=("--max-batch-size", "got 0")),
    _batch("max-negative", "-b", "auto", "--max-batch-size", "-1", says=("--max-batch-size", "got -1")),
    _batch("max-huge", "-b", "auto", "--max-batch-size", HUGE, says=("--max-batch-size", "at most")),
    _batch("max-nan", "-b", "auto", "--max-batch-size", "nan", says=("--max-batch-size", "'nan'")),
    _batch("auto-misspelt", "-b", "autox", says=("--batch-size", "'autox'")),
    _batch("auto-with-global", "-b", "auto", "--global-batch-size", "8", says=("--global-batch-size",)),
    # --max-batch-size is where auto starts: with any other batch size it would change nothing
    _batch(
        "max-without-auto", "-b", "4", "--max-batch-size", "8", says=("--max-batch-size", "--batch-size auto")
    ),
    _batch("max-without-batch", "--max-batch-size", "8", says=("--max-batch-size", "--batch-size auto")),
    Case(
        "batch-search-generate-max-without-auto",
        ("generate", "-p", "transformer", "--size", "debug", "-b", "2", "--max-batch-size", "8"),
        USAGE,
        ("--max-batch-size", "applies with --batch-size auto only"),
    ),
    Case(
        "batch-search-sweep-zero",
        ("sweep", "-p", "fc_mnist", "--size", "debug", "--generate", "-g", "batch_size=0,2", "--dry-run"),
        USAGE,
        ("--batch-size", "got 0"),
    ),
    # the README's placeholders, given to a store that holds other sweeps and tags
    Case(
        "placeholder-pareto-sweep",
        ("pareto", "--sweep", "sweep-1a2b3c"),
        USAGE,
        ("no sweep named 'sweep-1a2b3c'", "these exist: grid-a"),
        setup=sweep_named("grid-a"),
        watch={"store": "same"},
    ),
    Case(
        "placeholder-pareto-sweep-none-recorded",
        ("pareto", "--sweep", "sweep-1a2b3c"),
        USAGE,
        ("no sweep named 'sweep-1a2b3c'", "it holds no sweeps"),
        watch={"store": "same"},
    ),
    Case(
        "placeholder-report-tag",
        ("report", "--tag", "weekly", "--out", "{tmp}/r.html"),
        USAGE,
        ("no run is tagged 'weekly'", "its tags: cpu, nightly"),
        watch={"store": "same"},
    ),
    Case(
        "placeholder-plot-sweep",
        ("plot", "throughput", "--sweep", "nope", "--out", "{tmp}/p.png"),
        USAGE,
        ("no sweep named 'nope'",),
        setup=sweep_named("grid-a"),
        watch={"store": "same"},
    ),
    Case(
        "placeholder-export-tag",
        ("export", "--tag", "weekly"),
        USAGE,
        ("no run is tagged 'weekly'", "nightly"),
        watch={"store": "same"},
    ),
]
