"""The README's integration snippets are the example files the tests run, line for line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)

EXAMPLES = ["examples/anthropic_memory_tool.py"]


def _blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_readme_shows_the_example_file_itself(example: str) -> None:
    source = (ROOT / example).read_text(encoding="utf-8")
    assert f"`{example}`" in README.read_text(encoding="utf-8")
    assert source in _blocks(), f"the README's snippet for {example} is not the file"
