"""host_model: the model a session's host asked for last, read from the transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir.transcripts import host_model, load_transcript
from tests.transcripts.test_claude_code import Session, text


def session_answered_by(path: Path, *models: str | None) -> Path:
    """A session of one turn per model, each answer saying it came from that model."""
    session = Session()
    parent: str | None = None
    for i, _ in enumerate(models):
        session.user(f"u{i}", parent, f"question {i}")
        session.assistant(f"a{i}", f"u{i}", f"msg_{i}", [text(f"answer {i}")])
        parent = f"a{i}"
    session.write(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    answers = iter(models)
    for entry in lines:
        if entry["type"] == "assistant":
            model = next(answers)
            if model is None:
                entry["message"].pop("model")
            else:
                entry["message"]["model"] = model
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    return path


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        (("claude-sonnet-5-5", "claude-opus-5-5"), "claude-opus-5-5"),
        # Claude Code's placeholder for an answer no model wrote (an interruption, an error).
        (("claude-opus-5-5", "<synthetic>"), "claude-opus-5-5"),
        (("claude-opus-5-5[1m]",), "claude-opus-5-5"),
        (("claude-opus-5-5", None), "claude-opus-5-5"),
        ((None,), None),
    ],
)
def test_the_last_answer_names_the_hosts_model(
    tmp_path: Path, models: tuple[str | None, ...], expected: str | None
) -> None:
    transcript = load_transcript(session_answered_by(tmp_path / "s.jsonl", *models))
    assert host_model(transcript) == expected


def test_an_openai_chat_names_its_model_too(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    answer = {"role": "assistant", "content": "Noted.", "model": "gpt-4.1"}
    path.write_text(json.dumps([{"role": "user", "content": "Hi"}, answer]))
    assert host_model(load_transcript(path)) == "gpt-4.1"
