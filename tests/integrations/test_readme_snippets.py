"""The README's integration snippets are the example files the tests run, line for line:
a snippet is the whole file or a run of its lines (dedented alike), never a copy that can
drift from what is tested."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# A snippet follows the sentence that names its example file: "(`examples/x.py`)".
_SNIPPET = re.compile(r"`(examples/[\w.]+\.py)`[^`]*?:\n\n```python\n(.*?)```", re.S)

EXAMPLES = [
    "examples/anthropic_memory_tool.py",
    "examples/openai_agents_agent.py",
    "examples/pydantic_ai_agent.py",
    "examples/langchain_agent.py",
]


def _is_excerpt(snippet: str, source: str) -> bool:
    """Whether ``snippet`` is ``source``'s lines from one line to another, indentation
    removed alike."""
    want = textwrap.dedent(snippet).rstrip("\n").splitlines()
    lines = source.splitlines()
    for start in range(len(lines) - len(want) + 1):
        window = "\n".join(lines[start : start + len(want)])
        if textwrap.dedent(window).splitlines() == want:
            return True
    return False


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_readme_shows_the_example_file_itself(example: str) -> None:
    source = (ROOT / example).read_text(encoding="utf-8")
    snippets = [
        code for name, code in _SNIPPET.findall(README.read_text("utf-8")) if name == example
    ]
    assert snippets, f"the README shows no snippet of {example}"
    for snippet in snippets:
        assert _is_excerpt(snippet, source), f"the README's snippet is not lines of {example}"


def test_a_changed_line_is_caught() -> None:
    source = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    assert _is_excerpt("a = 1\nb = 2\n", source)
    assert not _is_excerpt("a = 1\nb = 3\n", source)
