"""One message larger than a request can hold is cut before it is sent, never sent whole.

Before, a standalone run cut tool results but sent text whole: one 50 MB line of a
transcript became a single request of ~13 M tokens, which no model takes. The command
line's side of it is in ``tests/cli/test_bounded_inputs.py``.
"""

from __future__ import annotations

from memdir.extract._standalone import TEXT_BLOCK_CHARS, render
from memdir.messages import Message, TextBlock


def test_a_huge_text_block_is_cut_with_a_marker() -> None:
    huge = "p" * (50 * TEXT_BLOCK_CHARS)
    shown = render(Message.user(f"Remember that I deploy on Fridays. {huge}"), 100)
    assert shown is not None
    assert shown.text.startswith("Remember that I deploy on Fridays. ppp")
    assert len(shown.text) < TEXT_BLOCK_CHARS + 100
    assert shown.text.endswith(f"[… {len(huge) + 35 - TEXT_BLOCK_CHARS} more characters cut]")


def test_ordinary_text_passes_whole() -> None:
    text = "I prefer small commits. " * 1000
    shown = render(Message.user(text), 100)
    assert shown is not None
    assert shown.text == text


def test_a_message_of_many_blocks_is_cut_as_a_whole() -> None:
    blocks = tuple(TextBlock(text=f"part {i} " + "q" * (TEXT_BLOCK_CHARS - 100)) for i in range(40))
    shown = render(Message(role="user", content=blocks), 100)
    assert shown is not None
    assert shown.text.startswith("part 0 ")
    assert len(shown.text) < TEXT_BLOCK_CHARS + 100
    assert shown.text.endswith("more characters cut]")
