"""Claude Code session JSONL: threading, merging, compaction, sidechains, bad lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memdir.messages import TextBlock, ToolResultBlock, ToolUseBlock
from memdir.transcripts import Transcript, load_transcript

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude-code-log"


class Session:
    """Builds a Claude Code session file line by line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.clock = 0

    def _envelope(self, kind: str, uuid: str, parent: str | None, **extra: Any) -> dict[str, Any]:
        self.clock += 1
        return {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work/app",
            "sessionId": "sess-1",
            "version": "2.1.0",
            "timestamp": f"2026-11-30T10:{self.clock // 60:02d}:{self.clock % 60:02d}.000Z",
            **extra,
        }

    def user(self, uuid: str, parent: str | None, content: Any, **extra: Any) -> Session:
        entry = self._envelope("user", uuid, parent, **extra)
        entry["message"] = {"role": "user", "content": content}
        self.lines.append(json.dumps(entry))
        return self

    def assistant(
        self, uuid: str, parent: str | None, msg_id: str, blocks: list[dict[str, Any]], **extra: Any
    ) -> Session:
        entry = self._envelope("assistant", uuid, parent, requestId=f"req_{msg_id}", **extra)
        entry["message"] = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": blocks,
            "stop_reason": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        self.lines.append(json.dumps(entry))
        return self

    def progress(self, uuid: str, parent: str | None) -> Session:
        """A hook's progress line: it threads the tree but carries no message."""
        entry = self._envelope("progress", uuid, parent, data={"type": "hook_progress"})
        self.lines.append(json.dumps(entry))
        return self

    def raw(self, line: str) -> Session:
        self.lines.append(line)
        return self

    def entry(self, entry: dict[str, Any]) -> Session:
        self.lines.append(json.dumps(entry))
        return self

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return path


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(i: str, name: str = "Read") -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": name, "input": {"file_path": f"/w/{i}"}}


def tool_result(i: str, body: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": body}


# --- the shared fixtures ---------------------------------------------------------------


def test_rewind_branch_and_compaction_fixture() -> None:
    t = load_transcript(FIXTURES / "dag_compact_after_rewind.jsonl")
    assert t.format == "claude-code"
    assert [m.uuid for m in t.messages] == [
        "u1", "a1", "b2u", "b2a", "b2u2", "b2a2", "cs", "p1u", "p1a",
    ]  # fmt: skip
    # The abandoned first attempt is not part of the conversation.
    assert "First attempt" not in " ".join(m.text for m in t.messages)
    flagged = [m.uuid for m in t.messages if m.is_compact_summary]
    assert flagged == ["cs"]
    assert t.skipped == ()
    assert t.session_id == "s1"
    assert t.cwd == "/tmp"


def test_edge_cases_fixture_counts_bad_lines_and_keeps_going() -> None:
    t = load_transcript(FIXTURES / "edge_cases.jsonl")
    reasons = {s.line: s.reason for s in t.skipped}
    assert reasons[13] == "not a JSON object"  # a bare string
    assert reasons[15] == "not a JSON object"  # 42
    assert reasons[16] == "not a JSON object"  # [1]
    assert reasons[14] == "unknown type None"  # {"silly": "this"}
    assert reasons[10].startswith("malformed user")  # "contenst" instead of "content"
    assert reasons[11].startswith("malformed user")  # message is a string
    # Lines 12 and 18 repeat the uuids of unreadable lines 11 and 10, so they stand in.
    assert 12 not in reasons
    assert 18 not in reasons
    assert len(t.skipped) == 6
    # Lines without parents are read in file order.
    texts = [m.text for m in t.messages]
    assert texts[0].startswith("Here's a message with some **markdown**")
    assert any("café, naïve" in x for x in texts)
    assert "wow error" in texts
    assert t.messages[-1].tool_uses[0].name == "TodoWrite"
    assert t.title is not None
    assert t.title.startswith("Tested various edge cases")


def test_showcase_fixture_with_subagent_files() -> None:
    t = load_transcript(
        FIXTURES / "minimal_showcase" / "55550000-0000-4000-8000-000000000001.jsonl"
    )
    assert len(t.messages) == 11
    assert all(not m.is_sidechain for m in t.messages)
    assert set(t.sidechains) == {"showcol1", "showcol2"}
    assert t.sidechains["showcol2"][-1].role == "assistant"
    assert all(m.is_sidechain for m in t.sidechains["showcol1"])


@pytest.mark.parametrize(
    "name",
    ["representative_messages.jsonl", "session_b.jsonl", "todowrite_examples.jsonl"],
)
def test_other_fixtures_load_without_skips(name: str) -> None:
    t = load_transcript(FIXTURES / name)
    assert t.messages
    assert t.skipped == ()


def test_summary_line_is_the_title() -> None:
    t = load_transcript(FIXTURES / "todowrite_examples.jsonl")
    assert t.title is not None
    assert t.title.startswith("Feature Implementation")


# --- built sessions ----------------------------------------------------------------------


def test_split_assistant_lines_merge_by_message_id(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "read two files")
    s.assistant("a1", "u1", "msg_1", [{"type": "thinking", "thinking": "hm", "signature": "sig"}])
    s.assistant("a2", "a1", "msg_1", [text("Reading both.")])
    s.assistant("a3", "a2", "msg_1", [tool_use("t1")])
    s.assistant("a4", "a3", "msg_1", [tool_use("t2")])
    s.user("r2", "a4", [tool_result("t2", "second")])
    s.user("r1", "r2", [tool_result("t1", "first")])
    s.assistant("a5", "r1", "msg_2", [text("Done.")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    roles = [m.role for m in t.messages]
    assert roles == ["user", "assistant", "user", "user", "assistant"]
    merged = t.messages[1]
    assert [type(b).__name__ for b in merged.content] == [
        "ThinkingBlock", "TextBlock", "ToolUseBlock", "ToolUseBlock",
    ]  # fmt: skip
    assert merged.uuid == "a4"  # the last line's uuid
    # Results follow the call order, not the order they were logged in.
    assert [m.tool_results[0].tool_use_id for m in t.messages[2:4]] == ["t1", "t2"]
    assert t.messages[2].tool_results[0].text == "first"


def test_results_interleaved_between_blocks_of_one_response(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "go")
    s.assistant("a1", "u1", "msg_1", [tool_use("t1")])
    s.user("r1", "a1", [tool_result("t1", "one")])
    s.assistant("a2", "r1", "msg_1", [tool_use("t2")])
    s.user("r2", "a2", [tool_result("t2", "two")])
    s.assistant("a3", "r2", "msg_2", [text("ok")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.role for m in t.messages] == ["user", "assistant", "user", "user", "assistant"]
    assert [b.id for b in t.messages[1].tool_uses] == ["t1", "t2"]
    assert [m.tool_results[0].tool_use_id for m in t.messages[2:4]] == ["t1", "t2"]


def test_one_user_line_with_results_out_of_order(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "go")
    s.assistant("a1", "u1", "msg_1", [tool_use("t1"), tool_use("t2"), tool_use("t3")])
    s.user("r", "a1", [tool_result("t3", "3"), tool_result("t1", "1"), tool_result("t2", "2")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    results = t.messages[2].content
    assert all(isinstance(b, ToolResultBlock) for b in results)
    assert [b.tool_use_id for b in results if isinstance(b, ToolResultBlock)] == ["t1", "t2", "t3"]


def test_rewind_with_compaction_and_tool_noise(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "plan the release")
    s.assistant("a1", "u1", "m1", [text("Sure.")])
    s.user("x1", "a1", "wrong direction")  # abandoned by a rewind
    s.assistant("x2", "x1", "mx", [text("abandoned")])
    s.user("u2", "a1", "ship on Friday")
    s.assistant("a2", "u2", "m2", [tool_use("t1", "Bash")])
    s.user("r2", "a2", [tool_result("t1", "ok")])
    s.assistant("a3", "r2", "m3", [text("Noted.")])
    s.entry(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "cb",
            "parentUuid": None,
            "logicalParentUuid": "a3",
            "content": "Conversation compacted",
            "isSidechain": False,
        }
    )
    s.user("cs", "cb", "This session is being continued...", isCompactSummary=True)
    s.user("u3", "cs", "and tag it v2")
    s.assistant("a4", "u3", "m4", [text("Tagged.")])
    s.entry({"type": "summary", "summary": "Release planning", "leafUuid": "a4"})
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == [
        "u1", "a1", "u2", "a2", "r2", "a3", "cs", "u3", "a4",
    ]  # fmt: skip
    assert [m.is_compact_summary for m in t.messages].count(True) == 1
    assert t.messages[6].is_compact_summary
    assert t.title == "Release planning"


def test_latest_rewind_wins_even_when_shorter(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.assistant("a1", "u1", "m1", [text("b")])
    s.user("u2", "a1", "c")
    s.assistant("a2", "u2", "m2", [text("d")])
    s.user("u2b", "a1", "rewound")  # the user went back to a1 and typed again
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == ["u1", "a1", "u2b"]


def test_trailing_bookkeeping_lines_do_not_hide_the_branch(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.assistant("a1", "u1", "m1", [text("b")])
    s.entry({"type": "system", "subtype": "turn_duration", "uuid": "d1", "parentUuid": "u1"})
    s.entry({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == ["u1", "a1"]
    assert t.skipped == ()


def test_sidechain_lines_stay_off_the_main_thread(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "survey the repo")
    s.assistant("a1", "u1", "m1", [tool_use("task1", "Task")])
    s.user("sc1", None, "Survey src/", isSidechain=True, agentId="ag1")
    s.assistant("sc2", "sc1", "msc", [text("src has 3 modules")], isSidechain=True, agentId="ag1")
    s.user("r1", "a1", [tool_result("task1", "agentId: ag1\nsrc has 3 modules")])
    s.assistant("a2", "r1", "m2", [text("Three modules.")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == ["u1", "a1", "r1", "a2"]
    assert [m.uuid for m in t.sidechains["ag1"]] == ["sc1", "sc2"]
    assert all(m.is_sidechain for m in t.sidechains["ag1"])


def test_a_subagent_file_alone_is_its_own_conversation(tmp_path: Path) -> None:
    s = Session()
    s.user("sc1", None, "Survey src/", isSidechain=True, agentId="ag1")
    s.assistant("sc2", "sc1", "m", [text("done")], isSidechain=True, agentId="ag1")
    t = load_transcript(s.write(tmp_path / "agent-ag1.jsonl"))
    assert [m.uuid for m in t.messages] == ["sc1", "sc2"]


def test_meta_flags_timestamps_and_string_content(tmp_path: Path) -> None:
    s = Session()
    s.user("u0", None, "<system-reminder>hi</system-reminder>", isMeta=True)
    s.user("u1", "u0", "hello")
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.messages[0].is_meta
    assert not t.messages[1].is_meta
    assert t.messages[1].content == (TextBlock(text="hello"),)
    assert t.messages[1].timestamp is not None
    assert t.messages[1].timestamp.tzinfo is not None


def test_malformed_lines_are_counted_with_line_numbers(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.raw("{not json")
    s.raw('"a string"')
    s.raw("[1, 2]")
    s.raw('{"type": "mystery", "uuid": "m"}')
    s.user("u2", "u1", 42)  # content that is neither a string nor a list
    s.raw('{"type": "assistant", "message": {"role": "assistant", "content": []}}')  # no uuid
    s.assistant("a1", "u2", "m1", [text("still here")])
    path = s.write(tmp_path / "s.jsonl")
    with path.open("ab") as handle:
        handle.write(b'{"type": "user", "x": "\xff\xfe"}\n')
    t = load_transcript(path)
    by_line = {x.line: x.reason for x in t.skipped}
    assert by_line[2] == "not JSON"
    assert by_line[3] == by_line[4] == "not a JSON object"
    assert by_line[5] == "unknown type 'mystery'"
    assert by_line[6].startswith("malformed user")
    assert by_line[7] == "assistant line without a uuid"
    assert by_line[9] == "not UTF-8"
    # The malformed line still threads the conversation: a1's parent chain reaches u1.
    assert [m.uuid for m in t.messages] == ["u1", "a1"]


def test_parent_loop_does_not_hang(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", "u2", "a")
    s.user("u2", "u1", "b")
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert {m.uuid for m in t.messages} <= {"u1", "u2"}


def test_tool_use_blocks_come_through_intact(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "edit")
    s.assistant("a1", "u1", "m1", [tool_use("t1", "Edit")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    block = t.messages[1].content[0]
    assert isinstance(block, ToolUseBlock)
    assert block.name == "Edit"
    assert block.input == {"file_path": "/w/t1"}


# --- parallel tool calls off the single path ---------------------------------------------


def shape(t: Transcript) -> list[tuple[str, list[str]]]:
    """Each message as its role and its blocks: text, ``use:<id>``, ``result:<id>``."""
    out: list[tuple[str, list[str]]] = []
    for m in t.messages:
        blocks = []
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                blocks.append(f"use:{b.id}")
            elif isinstance(b, ToolResultBlock):
                blocks.append(f"result:{b.tool_use_id}")
            else:
                blocks.append(type(b).__name__)
        out.append((m.role, blocks))
    return out


def test_the_result_of_a_call_before_hook_progress_lines_is_kept(tmp_path: Path) -> None:
    # Claude Code 2.1.39: hook progress lines stand between two calls of one response,
    # and the first call's result hangs off the first call's line, not on the path.
    s = Session()
    s.user("u1", None, "run both")
    s.assistant("a1", "u1", "msg_1", [tool_use("t1", "Bash")])
    s.progress("p1", "a1").progress("p2", "p1")
    s.assistant("a2", "p2", "msg_1", [tool_use("t2", "Bash")])
    s.progress("p3", "a2")
    s.user("r1", "a1", [tool_result("t1", "one")])
    s.user("r2", "a2", [tool_result("t2", "two")])
    s.assistant("a3", "r2", "msg_2", [text("Both ran.")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert shape(t) == [
        ("user", ["TextBlock"]),
        ("assistant", ["use:t1", "use:t2"]),
        ("user", ["result:t1"]),
        ("user", ["result:t2"]),
        ("assistant", ["TextBlock"]),
    ]
    assert t.messages[2].tool_results[0].text == "one"
    assert t.skipped == ()


def test_sibling_call_lines_and_their_results_are_taken_back(tmp_path: Path) -> None:
    # Claude Code 2.1.332: the second result is logged first, the next answer hangs off
    # the first result, so the path runs through the first call only.
    s = Session()
    s.user("u1", None, "read a and b")
    s.assistant("a1", "u1", "msg_1", [text("Reading both.")])
    s.assistant("a2", "a1", "msg_1", [tool_use("ta")])
    s.assistant("a3", "a2", "msg_1", [tool_use("tb")])
    s.user("rb", "a3", [tool_result("tb", "beta")], sourceToolAssistantUUID="a3")
    s.user("ra", "a2", [tool_result("ta", "alpha")], sourceToolAssistantUUID="a2")
    s.assistant("a4", "ra", "msg_2", [text("alpha and beta")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert shape(t) == [
        ("user", ["TextBlock"]),
        ("assistant", ["TextBlock", "use:ta", "use:tb"]),
        ("user", ["result:ta"]),
        ("user", ["result:tb"]),
        ("assistant", ["TextBlock"]),
    ]
    assert t.messages[1].uuid == "a3"  # the response's line logged last


def test_calls_keep_the_order_they_were_logged_in(tmp_path: Path) -> None:
    # The fourth call's line hangs off the first call's result, after hook lines.
    s = Session()
    s.user("u1", None, "four commands")
    s.assistant("a0", "u1", "msg_1", [text("Running four.")])
    s.assistant("a1", "a0", "msg_1", [tool_use("t1", "Bash")])
    s.progress("p1", "a1")
    s.assistant("a2", "p1", "msg_1", [tool_use("t2", "Bash")])
    s.assistant("a3", "a2", "msg_1", [tool_use("t3", "Bash")])
    s.user("r1", "a1", [tool_result("t1", "1")])
    s.progress("p2", "r1")
    s.assistant("a4", "p2", "msg_1", [tool_use("t4", "Bash")])
    s.user("r2", "a2", [tool_result("t2", "2")])
    s.user("r3", "a3", [tool_result("t3", "3")])
    s.user("r4", "a4", [tool_result("t4", "4")])
    s.assistant("a5", "r4", "msg_2", [text("Done.")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert shape(t) == [
        ("user", ["TextBlock"]),
        ("assistant", ["TextBlock", "use:t1", "use:t2", "use:t3", "use:t4"]),
        ("user", ["result:t1"]),
        ("user", ["result:t2"]),
        ("user", ["result:t3"]),
        ("user", ["result:t4"]),
        ("assistant", ["TextBlock"]),
    ]


def test_a_rewind_beside_parallel_calls_is_still_left_out(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "check both services")
    s.assistant("a1", "u1", "msg_1", [tool_use("t1", "Bash")])
    s.assistant("a2", "a1", "msg_1", [tool_use("t2", "Bash")])
    s.user("r1", "a1", [tool_result("t1", "api up")])
    s.user("r2", "a2", [tool_result("t2", "db up")])
    s.assistant("b1", "r2", "msg_2", [text("Both are up.")])
    # A prompt typed while the calls ran, then rewound: it hangs off a call line.
    s.user("uz", "a2", "actually, restart the db")
    s.assistant("az", "uz", "msg_z", [tool_use("tz", "Bash")])
    s.user("rz", "az", [tool_result("tz", "db restarted")])
    # A whole abandoned turn with its own parallel calls.
    s.user("ux", "b1", "now deploy")
    s.assistant("ax1", "ux", "msg_x", [tool_use("tx1", "Bash")])
    s.assistant("ax2", "ax1", "msg_x", [tool_use("tx2", "Bash")])
    s.user("rx1", "ax1", [tool_result("tx1", "deployed api")])
    s.user("rx2", "ax2", [tool_result("tx2", "deployed db")])
    # The rewind: a new prompt under b1.
    s.user("uy", "b1", "thanks, that is all")
    s.assistant("ay", "uy", "msg_y", [text("You're welcome.")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == ["u1", "a2", "r1", "r2", "b1", "uy", "ay"]
    everything = " ".join(repr(m.content) for m in t.messages)
    for abandoned in ("restart", "db restarted", "deploy", "tx1", "tx2", "tz"):
        assert abandoned not in everything


def test_a_result_already_on_the_path_is_not_taken_twice(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "go")
    s.assistant("a1", "u1", "msg_1", [tool_use("t1")])
    s.assistant("a2", "a1", "msg_1", [tool_use("t2")])
    s.user("r1-stale", "a1", [tool_result("t1", "stale copy")])
    s.user("r2", "a2", [tool_result("t2", "two")])
    s.user("r1", "r2", [tool_result("t1", "one")])
    s.assistant("a3", "r1", "msg_2", [text("ok")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    results = [b.tool_use_id for m in t.messages for b in m.tool_results]
    assert sorted(results) == ["t1", "t2"]
    assert "stale copy" not in " ".join(repr(m.content) for m in t.messages)


# --- files that other tools wrote ---------------------------------------------------------


UNTHREADED = [
    {"type": "user", "timestamp": "2024-01-01T10:00:00Z", "message": {"content": "Fix the bug"}},
    {
        "type": "assistant",
        "timestamp": "2024-01-01T10:00:05Z",
        "message": {"content": [text("Looking."), tool_use("toolu_1")]},
    },
    {
        "type": "user",
        "timestamp": "2024-01-01T10:00:06Z",
        "message": {"content": [tool_result("toolu_1", "def login(): ...")]},
    },
    {"type": "assistant", "message": {"content": [text("Fixed it.")]}},
]


def test_a_file_without_uuids_is_read_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in UNTHREADED[:3]), encoding="utf-8")
    first = load_transcript(path)
    assert shape(first) == [
        ("user", ["TextBlock"]),
        ("assistant", ["TextBlock", "use:toolu_1"]),
        ("user", ["result:toolu_1"]),
    ]
    assert first.skipped == ()
    assert len({m.uuid for m in first.messages}) == 3
    assert [m.uuid for m in load_transcript(path).messages] == [m.uuid for m in first.messages]
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(UNTHREADED[3]) + "\n")
    longer = load_transcript(path)
    assert [m.uuid for m in longer.messages][:3] == [m.uuid for m in first.messages]
    assert longer.messages[-1].text == "Fixed it."


def test_a_line_without_uuid_among_threaded_lines_is_still_skipped(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.raw(json.dumps(UNTHREADED[3]))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m.uuid for m in t.messages] == ["u1"]
    assert [x.reason for x in t.skipped] == ["assistant line without a uuid"]


def test_a_tool_call_without_id_keeps_its_line_and_gets_a_stable_id(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "open the readme")
    idless = {"type": "tool_use", "name": "Bash", "input": {"command": "cat README.md"}}
    s.assistant("a1", "u1", "msg_1", [text("Opening it."), idless])
    answer = {"type": "tool_result", "content": "# Title"}
    s.user("r1", "a1", [answer], sourceToolAssistantUUID="a1")
    s.user("r1b", "a1", [answer], sourceToolAssistantUUID="a1")  # a second answer: nothing left
    s.assistant("a2", "r1", "msg_2", [text("It has a title.")])
    path = s.write(tmp_path / "s.jsonl")
    t = load_transcript(path)
    call = t.messages[1].tool_uses[0]
    assert t.messages[1].text == "Opening it."
    assert call.name == "Bash"
    assert call.id.startswith("toolu_")
    assert call.extra["memdir:synthetic_id"] is True
    assert t.messages[2].tool_results[0].tool_use_id == call.id
    assert t.messages[2].tool_results[0].text == "# Title"
    assert load_transcript(path).messages[1].tool_uses[0].id == call.id
    assert [(x.line, x.reason) for x in t.skipped] == [
        (4, "malformed user: its tool results have no tool_use_id and no call to answer")
    ]


# --- line types of newer versions -----------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "atis-latch", "atis": ""},
        {"type": "tools-used", "tools": ["Read"]},
        {"type": "cost-state", "totalCostUSD": 0.06, "modelUsage": {}},
        {"type": "ai-title", "aiTitle": "Reading files"},
        {"type": "mode", "mode": "normal"},
        {"type": "worktree-state", "worktreeSession": None},
        {"type": "permission-mode", "permissionMode": "acceptEdits"},
        {"type": "api-request-shape", "shapeHash": "ab" * 32, "shape": {"system": []}},
        {"type": "api-request-blob", "hash": "cd" * 32, "message": {"role": "user", "content": []}},
        {"type": "api-request", "id": "r1", "querySource": "sdk", "shapeHash": "ef" * 32},
        {"type": "frame-link", "frameUrl": "x"},
        {"type": "relocated", "relocatedCwd": "/w"},
        {"type": "bridge-session", "bridgeSessionId": "b"},
        {"type": "api-request-resumed", "messageId": "m"},
    ],
    ids=lambda e: str(e["type"]),
)
def test_newer_line_types_are_read_quietly(tmp_path: Path, entry: dict[str, Any]) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.entry(entry)
    s.assistant("a1", "u1", "m1", [text("b")])
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.skipped == ()
    assert [m.uuid for m in t.messages] == ["u1", "a1"]


def test_the_ai_title_is_the_title_unless_there_is_a_custom_one(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    s.assistant("a1", "u1", "m1", [text("b")])
    s.entry({"type": "summary", "summary": "Old summary", "leafUuid": "a1"})
    s.entry({"type": "ai-title", "sessionId": "sess-1", "aiTitle": "First guess"})
    s.entry({"type": "ai-title", "sessionId": "sess-1", "aiTitle": "Reading the files"})
    assert load_transcript(s.write(tmp_path / "s.jsonl")).title == "Reading the files"
    s.entry({"type": "custom-title", "sessionId": "sess-1", "customTitle": "Mine"})
    assert load_transcript(s.write(tmp_path / "s.jsonl")).title == "Mine"
