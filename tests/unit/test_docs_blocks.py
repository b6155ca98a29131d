"""The docs' block markers are read as written, and an unmarked block is caught."""

from __future__ import annotations

from docs_blocks import blocks, pages, problems

PAGE = """# A page

<!-- run -->
```bash
flowrate list
```

<!-- file: m.py -->
```python
X = 1
```

<!-- not-run: needs a GPU -->
```bash
flowrate run -p gpt2
```

```text
output
```

```bash
flowrate runs
```
"""


def test_markers_are_read_per_block() -> None:
    found = blocks("p.md", PAGE)
    assert [(b.line, b.language, b.action, b.argument) for b in found] == [
        (4, "bash", "run", ""),
        (9, "python", "file", "m.py"),
        (14, "bash", "not-run", "needs a GPU"),
        (18, "text", "", ""),
        (22, "bash", "", ""),
    ]
    assert found[1].code == "X = 1\n"


def test_an_unmarked_block_is_a_problem() -> None:
    found = blocks("p.md", PAGE)
    assert [problems(b) for b in found[:4]] == [[], [], [], []]
    assert problems(found[4]) == [
        "p.md:22: a bash block with no <!-- run -->, <!-- file: NAME --> or <!-- not-run: REASON --> "
        "before it (shown output is a text block)"
    ]


def test_a_not_run_marker_needs_its_reason_and_only_code_runs() -> None:
    no_reason = blocks("p.md", "<!-- not-run: -->\n```bash\nx\n```\n")[0]
    assert no_reason.action == ""
    toml = blocks("p.md", "<!-- run -->\n```toml\nx = 1\n```\n")[0]
    assert problems(toml) == ["p.md:2: only bash and python blocks run, not toml"]


def test_every_block_of_the_site_is_run_written_or_says_why_not() -> None:
    found = pages()
    assert "getting-started.md" in found
    assert [p for page in found.values() for b in page for p in problems(b)] == []
