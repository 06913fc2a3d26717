"""Which memories a run's request lists in a store too large to list them all: those the
person's words touch, not every one a long answer or a tool's output happens to name."""

from __future__ import annotations

from pathlib import Path

from memdir.extract._relevance import relevance_text
from memdir.messages import Message, ToolResultBlock
from tests.extract.test_bounded_state import fill, run_once

# An answer that ranges over half the store, as answers that restate a design do.
WIDE_ANSWER = "Noted. " + " ".join(f"The topic{i:04d} service stays as it is." for i in range(20))


def listed(request_text: str) -> list[str]:
    return [line.split()[2] for line in request_text.splitlines() if line.startswith("- [")]


def test_the_persons_words_pick_the_memories_a_wide_answer_does_not(tmp_path: Path) -> None:
    fill(tmp_path, 60)
    messages = (
        Message.user("The quokka pipeline moved to Berlin."),
        Message.assistant(WIDE_ANSWER),
    )
    request = run_once(tmp_path, "standalone", messages=messages)
    assert listed(request.messages[-1].text) == ["note_0007.md"]


def test_relevance_reads_what_the_person_wrote() -> None:
    messages = [
        Message.user("Move the quokka pipeline to Berlin."),
        Message.assistant("Looking at the zebrafish dashboard first."),
        Message(role="user", content=(ToolResultBlock(tool_use_id="t1", content="walrus logs"),)),
        Message.user("hidden harness words", is_meta=True),
    ]
    text = relevance_text(messages)
    assert "quokka" in text
    assert "zebrafish" not in text
    assert "walrus" not in text
    assert "harness" not in text


def test_a_reply_of_a_word_or_two_leaves_the_rest_of_the_turn_to_say_what_it_was_about() -> None:
    messages = [Message.assistant("Shall I move the quokka pipeline?"), Message.user("yes, do")]
    assert "quokka" in relevance_text(messages)
