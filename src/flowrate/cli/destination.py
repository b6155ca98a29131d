"""Where a finished result goes: --out, the results store, the console, --json on stdout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowrate.cli import console

if TYPE_CHECKING:
    from flowrate.results.schema import Result
    from flowrate.results.store import Store


@dataclass
class Destination:
    """Opened from the output options before the run, so a damaged or newer store is reported
    before any time is spent measuring; the run is recorded after the --out file is written."""

    store: Store | None
    tags: tuple[str, ...]
    out: str | None
    quiet: bool
    as_json: bool
    silent: bool = False  # a data-parallel rank other than 0: rank 0 reports the merged run

    @classmethod
    def open(
        cls,
        store: str | None,
        tags: tuple[str, ...],
        no_store: bool,
        out: str | None,
        quiet: bool,
        as_json: bool,
    ) -> Destination:
        from flowrate.errors import ConfigError
        from flowrate.execution.launch import is_primary
        from flowrate.results.store import Store

        if no_store and (store or tags):
            raise ConfigError("no_store", "cannot be combined with --store or --tag")
        if not is_primary():
            return cls(None, (), None, True, False, silent=True)
        return cls(None if no_store else Store(store), tags, out, quiet, as_json)

    def report(self, result: Result, title: str, rows: list[tuple[str, str]]) -> None:
        """Save, record, show and print: the file first, so nothing measured is lost."""
        if self.silent:
            return
        if self.out:
            result.save(self.out)
            console.status(f"result written to {self.out}", self.quiet)
        if self.store is not None:
            with self.store:
                self.store.add(result, self.tags)
            tagged = f" tagged {', '.join(self.tags)}" if self.tags else ""
            console.status(f"recorded as run {result.run_id}{tagged} in {self.store.path}", self.quiet)
        if not self.quiet:
            console.key_value_table(title, rows)
        for warning in result.warnings:
            console.warn(warning)
        if self.as_json:
            console.data(result.to_json())

    def record_all(self, results: list[Result]) -> None:
        """Record several results (a sweep's points) in the store in one opening, and say each
        one's warnings; the caller lays the figures out (--out and --json hold one result)."""
        if self.silent:
            return
        if self.store is not None:
            with self.store:
                for result in results:
                    self.store.add(result, self.tags)
            for result in results:
                tagged = f" tagged {', '.join(self.tags)}" if self.tags else ""
                console.status(f"recorded as run {result.run_id}{tagged} in {self.store.path}", self.quiet)
        for result in results:
            for warning in result.warnings:
                console.warn(f"run {result.run_id}: {warning}")
