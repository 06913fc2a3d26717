"""bench/locomo.py on a small made-up dataset of the same shape: offline, and with an LLM.

The LLM run talks to FakeAnthropicServer through the official SDK; a handler plays the
memory agent, the memory selector, the answerer and the judge, so every figure the
harness reports follows from the scripted answers.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memdir.messages import Message, ToolUseBlock
from memdir.testing import FakeAnthropicServer

SCRIPT = Path(__file__).parent.parent / "bench" / "locomo.py"


def load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("locomo_bench", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


locomo = load_harness()

# Question → (category, gold, scripted answer, scripted verdict, expected F1 in percent).
QA: dict[str, tuple[int, Any, str, str, float]] = {
    "What is the name of Ada's sister?": (4, "Matilda", "Matilda", "CORRECT", 100.0),
    "How many marathons has Ada run?": (4, 3, "3", "CORRECT", 100.0),
    # [in, march, 2024] against [march, 2024]: precision 2/3, recall 1.
    "When did Ada run her latest marathon?": (
        2, "March 2024", "In March 2024", "CORRECT", 80.0,
    ),
    # "green tea" matches its part fully, "lemonade" nothing: (1 + 0) / 2.
    "Which drinks does Ada like?": (
        1, "green tea, lemonade", "green tea, coffee", "WRONG", 50.0,
    ),
    # Only the gold before ";" counts.
    "Would Ada enjoy a tea house?": (
        3, "Likely yes; she prefers green tea", "Likely yes", "CORRECT", 100.0,
    ),
    "What is the name of Bruno's sister?": (
        5, "Matilda", "No information available", "CORRECT", 100.0,
    ),
    # Taking the bait: the answer the false premise points to.
    "What does Bruno's sister drink?": (5, "green tea", "Green tea", "WRONG", 0.0),
}  # fmt: skip
EVIDENCE = {
    "What is the name of Ada's sister?": ["D1:1"],
    "How many marathons has Ada run?": ["D3:2"],
    "When did Ada run her latest marathon?": ["D3:2"],
    "Which drinks does Ada like?": ["D1:3; D3:2"],  # two ids in one string
    "Would Ada enjoy a tea house?": ["D"],  # unreadable
    "What is the name of Bruno's sister?": ["D1:1"],
    "What does Bruno's sister drink?": ["D9:1"],  # a session that does not exist
}


def qa_item(question: str) -> dict[str, Any]:
    category, gold, *_ = QA[question]
    item: dict[str, Any] = {"question": question, "evidence": EVIDENCE[question]}
    item["category"] = category
    item["adversarial_answer" if category == 5 else "answer"] = gold
    return item


def synthetic_sample(sample_id: str = "syn-1") -> dict[str, Any]:
    """One made-up conversation: sessions 1 and 3 exist, session 2 has only a date."""
    conversation = {
        "speaker_a": "Ada",
        "speaker_b": "Bruno",
        "session_1_date_time": "4:15 pm on 2 January, 2024",
        "session_1": [
            {"speaker": "Ada", "dia_id": "D1:1", "text": "Remember that my sister is Matilda."},
            {"speaker": "Bruno", "dia_id": "D1:2", "text": "Noted! Say hello to her."},
            {
                "speaker": "Ada",
                "dia_id": "D1:3",
                "text": "I prefer green tea over coffee.",
                "img_url": ["https://example.invalid/cup.jpg"],
                "blip_caption": "a cup of green tea on a table",
                "query": "green tea cup",
            },
        ],
        "session_2_date_time": "9:00 am on 9 February, 2024",
        "session_3_date_time": "10:30 am on 17 March, 2024",
        "session_3": [
            {"speaker": "Bruno", "dia_id": "D3:1", "text": "How did the race go?"},
            {"speaker": "Ada", "dia_id": "D3:2", "text": "I finished my third marathon!"},
        ],
    }
    return {
        "sample_id": sample_id,
        "conversation": conversation,
        "qa": [qa_item(q) for q in QA],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_synthetic.json"
    path.write_text(json.dumps([synthetic_sample()]), encoding="utf-8")
    return path


def run_harness(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], str]:
    code = locomo.main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), captured.err


def test_offline_end_to_end(data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "memory"
    result, err = run_harness(capsys, "--data", str(data), "--out", str(out))

    assert err.count("\n") == 1
    assert err.startswith("locomo: syn-1: 2 sessions")
    assert result["model"] == "offline"
    assert result["judge_model"] is None
    assert result["recall"] == "bm25"
    assert result["conversations"] == 1
    assert result["sessions"] == 2
    assert result["turns"] == 5
    assert result["questions"] == {
        "multi-hop": 1,
        "temporal": 1,
        "open-domain": 1,
        "single-hop": 2,
        "adversarial": 2,
        "total": 7,
    }
    assert result["questions_not_asked"] == 0
    saved = result["memories_saved"]
    assert saved["total"] > 0
    assert saved["per_session_mean"] == saved["total"] / 2
    assert result["extraction"]["runs"] == 2
    assert result["extraction"]["errors"] == 0
    # "Remember that my sister is Matilda": said plainly, so saved, so found.
    assert result["gold_in_memory_pct"]["single-hop"] > 0
    assert result["gold_in_recalled_pct"]["single-hop"] > 0
    assert "Matilda" in "".join(p.read_text() for p in (out / "syn-1" / "memory").glob("*.md"))
    assert result["f1_pct"] is None
    assert result["judge_pct"] is None
    assert "offline" in result["note"]
    assert result["elapsed_s"] >= 0
    [conversation] = result["per_conversation"]
    assert conversation["sample_id"] == "syn-1"
    assert conversation["memory_files"] >= 1


def test_sessions_limit_asks_only_what_was_replayed(data: Path, capsys) -> None:
    result, _ = run_harness(capsys, "--data", str(data), "--sessions", "1")

    assert result["sessions"] == 1
    # Evidence in session 1 only: the sister questions (the other ids are in session 3, or
    # unreadable, or name a session that does not exist).
    assert result["questions"]["total"] == 2
    assert result["questions"]["single-hop"] == 1
    assert result["questions"]["adversarial"] == 1
    assert result["questions_not_asked"] == 5


def text_of(body: dict[str, Any]) -> tuple[str, str]:
    """The system prompt and the last message's text of an Anthropic request body."""
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n".join(block.get("text", "") for block in system)
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return system, content
    return system, "\n".join(str(block.get("text", "")) for block in content)


def scripted(memory: Path) -> Any:
    """The handler: memory agent, memory selector, answerer and judge in one."""
    memories = [
        "Ada's sister is Matilda. Ada likes green tea and lemonade.",
        "Ada ran her 3rd marathon in March 2024: 3 marathons so far.",
    ]
    written: list[str] = []

    def handler(body: dict[str, Any]) -> Message | str:
        system, text = text_of(body)
        last = body["messages"][-1]["content"]
        if "memory agent" in system:
            if isinstance(last, list) and last[0].get("type") == "tool_result":
                return "Saved."
            name = f"fact_{len(written) + 1}.md"
            body_text = memories[len(written)]
            written.append(name)
            content = (
                f"---\nname: Fact {len(written)}\ndescription: {body_text}\n"
                f"type: user\n---\n\n{body_text}\n"
            )
            call = ToolUseBlock(
                id=f"toolu_{len(written)}",
                name="Write",
                input={"file_path": str(memory / name), "content": content},
            )
            return Message(role="assistant", content=(call,))
        if system.startswith("You pick the saved memories"):
            # The memory list is the first message, the question the last.
            names = sorted(set(re.findall(r"fact_\d+\.md", text_of_all(body)[1])))
            return json.dumps({"selected_memories": names})
        if system.startswith("You answer questions"):
            question = text.rsplit("Question: ", 1)[1].strip()
            return QA[question][2]
        if system.startswith("You grade answers"):
            found = re.search(r"Question: (.*)\n", text)
            assert found is not None
            return json.dumps({"label": QA[found.group(1)][3]})
        raise AssertionError(f"unexpected request: {system[:80]!r}")

    return handler


def text_of_all(body: dict[str, Any]) -> tuple[str, str]:
    """The system prompt and every message's text, joined."""
    system, _ = text_of(body)
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [str(block.get("text", "")) for block in content]
    return system, "\n".join(parts)


def test_llm_end_to_end_scores_follow_the_script(
    data: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    out = (tmp_path / "memory").resolve()
    with FakeAnthropicServer(handler=scripted(out / "syn-1" / "memory")) as fake:
        result, _ = run_harness(
            capsys,
            "--data",
            str(data),
            "--out",
            str(out),
            "--model",
            "anthropic:claude-fake-1",
            "--base-url",
            fake.base_url,
            "--concurrency",
            "2",
        )
        fake.assert_no_errors()
        requests = fake.requests

    assert result["model"] == "anthropic:claude-fake-1"
    assert result["judge_model"] == "anthropic:claude-fake-1"
    assert result["recall"] == "model"
    assert result["memories_saved"] == {"total": 2, "per_session_mean": 1.0, "memory_files": 2}
    assert result["extraction"]["runs"] == 2
    assert result["extraction"]["errors"] == 0
    assert result["answer_errors"] == 0
    assert result["judge_errors"] == 0
    assert result["f1_pct"] == {
        "multi-hop": 50.0,
        "temporal": 80.0,
        "open-domain": 100.0,
        "single-hop": 100.0,
        "adversarial": 50.0,
        "overall": round(530 / 7, 2),
        "overall_excluding_adversarial": 86.0,
    }
    assert result["judge_pct"] == {
        "multi-hop": 0.0,
        "temporal": 100.0,
        "open-domain": 100.0,
        "single-hop": 100.0,
        "adversarial": 50.0,
        "overall": round(500 / 7, 2),
        "overall_excluding_adversarial": 80.0,
    }
    # Without an LLM: the integer gold "3" and both multi-hop parts are in memory; the
    # open-domain gold ("Likely yes") is not.
    assert result["gold_in_memory_pct"]["single-hop"] == 100.0
    assert result["gold_in_memory_pct"]["multi-hop"] == 100.0
    assert result["gold_in_memory_pct"]["open-domain"] == 0.0
    assert result["answer_usage"]["output_tokens"] > 0
    assert result["judge_usage"]["output_tokens"] > 0

    texts = [text_of(r.body) for r in requests]
    # The session date reaches the memory agent; an image turn comes with its caption.
    extraction = [t for s, t in (text_of_all(r.body) for r in requests) if "memory agent" in s]
    assert any("2 January, 2024" in t and "green tea on a table" in t for t in extraction)
    judged = [t for s, t in texts if s.startswith("You grade answers")]
    assert len(judged) == 7
    assert any("Gold answer: 3\n" in t for t in judged)
    assert any("Gold answer: Likely yes\n" in t for t in judged)
    answered = [t for s, t in texts if s.startswith("You answer questions")]
    assert all("Matilda" in t and "March 2024" in t for t in answered)


def test_scores_follow_the_locomo_rules() -> None:
    assert locomo.token_f1("The cat sat.", "a cat sat") == 1.0
    assert locomo.token_f1("running dogs", "the dog runs") == 1.0  # stemmed
    assert locomo.locomo_f1("Not mentioned in the chat", "anything", 5) == 1.0
    assert locomo.locomo_f1("Paris", "Paris; she said so", 3) == 1.0
    assert locomo.multi_hop_f1("tea, coffee", "coffee, tea, milk") == pytest.approx(2 / 3)
    assert [locomo.porter_stem(w) for w in ("relational", "hopping", "ponies", "sky")] == [
        "relat",
        "hop",
        "poni",
        "sky",
    ]
    assert locomo.parse_label('```json\n{"label": "WRONG"}\n```') is False
    assert locomo.parse_label("CORRECT") is True
    assert locomo.parse_label("no idea") is None


def test_missing_data_is_a_clear_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "locomo10.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().count("\n") == 0
    assert "not found" in done.stderr
    assert str(missing) in done.stderr


def test_out_must_not_hold_earlier_memories(data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "memory"
    run_harness(capsys, "--data", str(data), "--out", str(out))

    assert locomo.main(["--data", str(data), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not empty" in captured.err


def test_default_data_lies_next_to_the_repository() -> None:
    root = SCRIPT.resolve().parent.parent
    expected = root / ".." / "shared" / "research-data" / "locomo" / "locomo10.json"
    assert expected == locomo.DEFAULT_DATA


def test_retrieval_figures_on_the_evidence(data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    result, _ = run_harness(capsys, "--data", str(data), "--out", str(out))
    retrieval = result["retrieval"]
    # Five questions name sessions that exist ("D" and "D9:1" do not).
    assert retrieval["questions"] == 5
    assert set(retrieval) == {"questions", *locomo.RETRIEVERS}
    for method in locomo.RETRIEVERS:
        figures = retrieval[method]["evidence_session_pct"]
        assert list(figures) == ["top_1", "top_3", "top_5", "top_10"]
        assert figures["top_1"] <= figures["top_3"] <= figures["top_5"] <= figures["top_10"]
    # The sessions are transcripts beside the memory, as in a Claude Code project.
    assert sorted(p.name for p in (out / "syn-1").glob("*.jsonl")) == [
        "session-1.jsonl",
        "session-3.jsonl",
    ]
    assert retrieval["search"]["evidence_turn_pct"]["top_10"] == 100.0
    assert retrieval["bm25_baseline"]["evidence_turn_pct"]["top_10"] == 100.0
    assert all(v is None for v in retrieval["recall"]["evidence_turn_pct"].values())
    assert (
        result["gold_in_recalled_with_fallback_pct"]["overall"]
        >= result["gold_in_recalled_pct"]["overall"]
    )


def test_the_baseline_ranks_raw_turns_by_bm25() -> None:
    turns = [
        (1, "D1:1", "Ada: my sister is Matilda"),
        (1, "D1:2", "Bruno: say hello to her"),
        (2, "D2:1", "Ada: I ran a marathon, a long marathon"),
    ]
    ranker = locomo.TurnBm25(turns)
    assert ranker.rank("who is the sister", 10) == [locomo.Found(1, "D1:1")]
    assert ranker.rank("marathon sister", 1) == [locomo.Found(2, "D2:1")]
    assert ranker.rank("nothing shared", 10) == []
    assert locomo.evidence_turns(["D1:3; D2:04", "D9:1", "D"], {1, 2}) == {"D1:3", "D2:4"}
