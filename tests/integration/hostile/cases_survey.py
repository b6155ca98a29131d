"""`flowrate survey` and survey records: a band file that is not one, a card that is not HTML,
a survey under torchrun, a survey compared with a run, a survey file with a figure of the wrong
type. Each a mistake: exit 2 and one line naming the flag or the file."""

from __future__ import annotations

from typing import Any

from hostile.case import FAILED, OK, RUN_A, USAGE, Case, Workspace
from hostile.setups import plain_file, result_file

# the survey's cheapest run: one tiny shape, one precision, no model
SURVEY = ("survey", "--quick", "--seconds", "0.05", "--shapes", "64x64x64", "--precision", "fp32")
SURVEY = (*SURVEY, "--no-model")
LAUNCH = {"name": "launch", "value": 2.5e-6, "unit": "s", "band_low": 2e-7, "band_high": 5e-4}


def _survey(**figure: Any):  # type: ignore[no-untyped-def]
    """A result file holding a survey of one figure (launch, with ``figure``'s fields changed)."""

    def change(record: dict[str, Any]) -> None:
        record["kind"] = "survey"
        record["survey"] = {"device": "<b>Test CPU</b>", "quick": True, "figures": [{**LAUNCH, **figure}]}

    return change


def _bands(text: str | bytes):  # type: ignore[no-untyped-def]
    def setup(ws: Workspace) -> None:
        path = ws.path("bands", "bands.json")
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def _band_case(name: str, text: str | bytes, says: tuple[str, ...]) -> Case:
    return Case(
        f"survey-bands-{name}",
        (*SURVEY, "--strict", "--bands", "{bands}"),
        USAGE,
        ("bands", *says),
        setup=_bands(text),
        watch={"bands": "same"},
        before_measuring=True,
    )


CASES = [
    _band_case("not-json", "{oops", ("is not valid JSON",)),
    _band_case("binary", b"\xff\xfe\x00\x81", ("is not UTF-8",)),
    _band_case("array", "[[0, 1]]", ("must be a JSON object",)),
    _band_case("inverted", '{"copy": [2, 1]}', ("'copy' must be [low, high]",)),
    _band_case("nan", '{"copy": [NaN, 1]}', ("'copy' must be [low, high]",)),
    _band_case("string", '{"launch": "fast"}', ("'launch' must be [low, high]",)),
    Case("survey-bands-missing", (*SURVEY, "--bands", "{tmp}/none.json"), USAGE, ("band file", "none.json")),
    Case(
        "survey-html-not-html",
        (*SURVEY, "--html", "{card}"),
        USAGE,
        ("html", "name it .html or .htm"),
        setup=plain_file("card", "old\n"),
        watch={"card": "same"},
    ),
    Case(
        "survey-under-torchrun-with-a-device-flag",
        SURVEY,
        (FAILED, USAGE),  # torchrun's own exit code for a rank that exits 2
        ("precision", "applies without torchrun"),
        driver="torchrun",
        timeout_s=180,
    ),
    Case(
        "compare-survey-with-run",
        ("compare", "{survey}", RUN_A),
        USAGE,
        ("surveys are compared with surveys only",),
        setup=result_file("survey", _survey()),
        watch={"survey": "same"},
    ),
    Case(
        "compare-two-surveys",
        ("compare", "{survey}", "{survey}"),
        OK,
        out=("launch", "2.5 µs"),
        setup=result_file("survey", _survey()),
        watch={"survey": "same"},
    ),
    Case(
        "show-survey-figure-value-a-string",
        ("show", "{survey}"),
        USAGE,
        ("survey.figures[0].value", "a finite number >= 0"),
        setup=result_file("survey", _survey(value="fast")),
        watch={"survey": "same"},
    ),
    Case(
        "show-survey-figure-band-a-list",
        ("show", "{survey}"),
        USAGE,
        ("survey.figures[0].within_band",),
        setup=result_file("survey", _survey(within_band=[True])),
        watch={"survey": "same"},
    ),
    Case(
        "show-survey-figures-not-a-list",
        ("show", "{survey}"),
        USAGE,
        ("survey.figures",),
        setup=result_file("survey", lambda record: _survey()(record) or record["survey"].update(figures=3)),
        watch={"survey": "same"},
    ),
    Case(
        "show-survey-figure-value-nan",
        ("show", "{survey}"),
        USAGE,
        ("survey.figures[0].value",),
        setup=result_file("survey", _survey(value=float("nan"))),
        watch={"survey": "same"},
    ),
]
