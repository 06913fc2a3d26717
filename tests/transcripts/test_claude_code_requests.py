"""Claude Code's recorded requests: rebuilt from shapes, blobs and the transcript's lines."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from memdir.transcripts import ClaudeCodeRequest, Transcript, load_transcript
from memdir.transcripts._canonical_json import canonical_json, sha256_hex
from tests.transcripts.test_claude_code import Session, text, tool_result, tool_use

SYSTEM: list[dict[str, Any]] = [
    {"type": "text", "text": "You are a coding agent."},
    {"type": "text", "text": "Be brief."},
]
TOOLS: list[dict[str, Any]] = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]
PARAMS: dict[str, Any] = {
    "model": "claude-opus-5-5",
    "betas": ["claude-code-20250219", "context-management-2025-06-27"],
    "max_tokens": 128000,
    "thinking": {"type": "adaptive", "display": "omitted"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "medium"},
}
EPHEMERAL = {"type": "ephemeral"}
FIRST = {
    "role": "user",
    "content": [
        {"type": "text", "text": "<system-reminder>\nToday is Monday.\n</system-reminder>"},
        {"type": "text", "text": "read a.txt"},
    ],
}


# The test's own hashing, independent of the module's: for ASCII data with integers only,
# Python's sorted compact JSON is the text Claude Code hashes.
def digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def as_blocks(message: dict[str, Any]) -> dict[str, Any]:
    if isinstance(message["content"], str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def message_hash(message: dict[str, Any]) -> str:
    return digest(unmarked(as_blocks(message)))


def mark(body: dict[str, Any], *paths: list[Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    for path in paths:
        target: Any = body
        for step in path:
            target = target[step]
        target["cache_control"] = dict(EPHEMERAL)
    return body


class Recorder(Session):
    """A session that also records requests the way Claude Code 2.1.332 does."""

    def shape(self, system: Any = SYSTEM, tools: Any = TOOLS) -> str:
        shape_hash = digest({"system": system, "tools": tools})
        shape = {"system": system, "tools": tools}
        self.entry({"type": "api-request-shape", "shapeHash": shape_hash, "shape": shape})
        return shape_hash

    def blob(self, message: dict[str, Any]) -> str:
        key = message_hash(message)
        self.entry({"type": "api-request-blob", "hash": key, "message": unmarked(message)})
        return key

    def request(
        self,
        request_id: str,
        body: dict[str, Any],
        tail: list[str],
        *,
        base: str | None = None,
        keep: int = 0,
        query_source: str = "sdk",
        **extra: Any,
    ) -> dict[str, Any]:
        """Record ``body`` (markers included) as Claude Code would; returns the record."""
        markers: list[dict[str, Any]] = []

        def find(value: Any, path: list[Any]) -> None:
            if isinstance(value, list):
                for i, item in enumerate(value):
                    find(item, [*path, i])
            elif isinstance(value, dict):
                for key, item in value.items():
                    if key == "cache_control":
                        markers.append({"path": path, "value": item})
                    else:
                        find(item, [*path, key])

        for root in ("system", "tools", "messages"):
            find(body[root], [root])
        hashed = {**body, "messages": [as_blocks(m) for m in body["messages"]]}
        record: dict[str, Any] = {
            "type": "api-request",
            "sessionId": "sess-1",
            "id": request_id,
            "querySource": query_source,
            "shapeHash": digest({"system": unmarked(body["system"]), "tools": body["tools"]}),
            "params": {k: v for k, v in body.items() if k not in ("system", "tools", "messages")},
            "thread": {"type": "none"},
            **({"base": base} if base is not None else {}),
            "keep": keep,
            "tail": tail,
            "cacheControl": markers,
            "requestDigest": digest(hashed),
            **extra,
        }
        self.entry(record)
        return record


def body_of(messages: list[dict[str, Any]], *paths: list[Any]) -> dict[str, Any]:
    return mark({**PARAMS, "system": SYSTEM, "tools": TOOLS, "messages": messages}, *paths)


def two_requests() -> tuple[Recorder, dict[str, Any], dict[str, Any]]:
    """A turn with a tool call: the first request from a blob, the second from lines."""
    s = Recorder()
    s.user("u1", None, "read a.txt")
    s.shape()
    first = body_of([FIRST], ["system", 1], ["messages", 0, "content", 1])
    s.request("req-1", first, [s.blob(FIRST)])
    s.assistant("a1", "u1", "msg_1", [text("Reading.")])
    s.assistant("a2", "a1", "msg_1", [tool_use("t1")])
    s.user("r1", "a2", [tool_result("t1", "alpha")])
    answer = {"role": "assistant", "content": [text("Reading."), tool_use("t1")]}
    results = {"role": "user", "content": [tool_result("t1", "alpha")]}
    second = body_of([FIRST, answer, results], ["system", 1], ["messages", 2, "content", 0])
    s.request("req-2", second, [message_hash(answer), message_hash(results)], base="req-1", keep=1)
    s.assistant("a3", "r1", "msg_2", [text("It says alpha.")])
    return s, first, second


def load(s: Session, tmp_path: Path) -> Transcript:
    return load_transcript(s.write(tmp_path / "s.jsonl"))


# --- rebuilding --------------------------------------------------------------------------


def test_requests_are_rebuilt_with_their_markers(tmp_path: Path) -> None:
    s, first, second = two_requests()
    t = load(s, tmp_path)
    assert t.skipped == ()
    assert t.unusable_requests == ()
    assert [r.id for r in t.requests] == ["req-1", "req-2"]
    one, two = t.requests
    assert one.body() == first
    assert two.body() == second
    # The first request's marker on its first message does not leak into the second.
    assert "cache_control" not in two.messages[0]["content"][1]
    assert two.messages[1] == {"role": "assistant", "content": [text("Reading."), tool_use("t1")]}
    assert two.model == "claude-opus-5-5"
    assert "model" not in two.params
    assert two.params["max_tokens"] == 128000
    assert [m.path for m in two.cache_control] == [("system", 1), ("messages", 2, "content", 0)]
    assert two.query_source == "sdk"
    assert two.is_main_thread
    assert two.line == 8


def test_verify_checks_the_recorded_digest(tmp_path: Path) -> None:
    t = load(two_requests()[0], tmp_path)
    one, two = t.requests
    assert one.verify()
    assert two.verify()
    assert not dataclasses.replace(two, request_digest="0" * 64).verify()
    assert not dataclasses.replace(two, request_digest=None).verify()
    assert not dataclasses.replace(two, cache_control=(), messages=one.messages).verify()
    unmarked_system = tuple(unmarked(b) for b in SYSTEM)
    assert not dataclasses.replace(two, system=unmarked_system).verify()
    billing = {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"}
    assert isinstance(two.system, tuple)
    assert not dataclasses.replace(two, system=(billing, *two.system)).verify()


def test_a_string_content_is_hashed_as_one_text_block(tmp_path: Path) -> None:
    s = Recorder()
    s.user("u1", None, "hello")
    s.shape()
    message = {"role": "user", "content": "hello"}
    s.request("req-1", body_of([message]), [s.blob(message)])
    (request,) = load(s, tmp_path).requests
    assert request.messages[0] == message
    assert request.verify()
    listed = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert dataclasses.replace(request, messages=(listed,)).verify()


def test_messages_come_from_runs_of_lines(tmp_path: Path) -> None:
    s = Recorder()
    s.user("u1", None, "first")
    s.user("u2", "u1", [text("second")])
    boundary = {"type": "system", "subtype": "compact_boundary", "logicalParentUuid": "u2"}
    s.entry({**boundary, "uuid": "cb", "parentUuid": None})
    s.user("u3", "cb", "third")
    s.shape()
    both = {"role": "user", "content": [text("first"), text("second")]}
    after = {"role": "user", "content": [text("third")]}
    s.request("req-1", body_of([both]), [message_hash(both)])
    s.request("req-2", body_of([after]), [message_hash(after)])
    t = load(s, tmp_path)
    assert t.unusable_requests == ()
    assert [r.messages for r in t.requests] == [(both,), (after,)]
    assert all(r.verify() for r in t.requests)


# --- what cannot be rebuilt ----------------------------------------------------------------


def drop_lines(s: Session, kind: str) -> Session:
    s.lines = [line for line in s.lines if json.loads(line).get("type") != kind]
    return s


@pytest.mark.parametrize(
    ("missing", "reasons"),
    [
        (
            "api-request-shape",
            [
                "request not rebuilt: its system and tools (shape {shape}) are not in the file",
                "request not rebuilt: its system and tools (shape {shape}) are not in the file",
            ],
        ),
        (
            "api-request-blob",
            [
                "request not rebuilt: its message {blob} is not in the file",
                "request not rebuilt: its base request req-1 is not in the file or was not rebuilt",
            ],
        ),
    ],
)
def test_a_missing_record_makes_requests_unusable(
    tmp_path: Path, missing: str, reasons: list[str]
) -> None:
    s = two_requests()[0]
    shape = json.loads(next(x for x in s.lines if '"api-request-shape"' in x))["shapeHash"]
    blob = json.loads(next(x for x in s.lines if '"api-request-blob"' in x))["hash"]
    t = load(drop_lines(s, missing), tmp_path)
    assert t.requests == ()
    assert [x.reason for x in t.unusable_requests] == [
        r.format(shape=shape[:12], blob=blob[:12]) for r in reasons
    ]
    assert t.skipped == ()
    assert t.last_main_request() is None
    assert len(t.messages) == 4  # the conversation itself is whole


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"cacheControl": [{"path": ["messages", 9, "content", 0], "value": EPHEMERAL}]},
         "its cache_control marker at messages.9.content.0 does not fit"),
        ({"cacheControl": [{"path": ["params"], "value": EPHEMERAL}]},
         "a cache_control marker has an unusable path: ['params']"),
        ({"tail": "abc"}, "its 'tail' is not a list of hashes"),
        ({"keep": 3}, "it keeps messages but names no base request"),
        ({"params": {"max_tokens": 5}}, "its params name no model"),
        ({"id": None}, "its record has no 'id'"),
    ],
)  # fmt: skip
def test_a_malformed_request_record_is_noted(
    tmp_path: Path, change: dict[str, Any], reason: str
) -> None:
    s = Recorder()
    s.user("u1", None, "read a.txt")
    s.shape()
    s.request("req-1", body_of([FIRST]), [s.blob(FIRST)])
    record = json.loads(s.lines[-1])
    s.lines[-1] = json.dumps({**record, **change})
    t = load(s, tmp_path)
    assert [(x.line, x.reason) for x in t.unusable_requests] == [
        (4, f"request not rebuilt: {reason}")
    ]
    assert t.skipped == ()


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"type": "api-request-blob", "message": FIRST}, "api-request-blob line without a hash"),
        ({"type": "api-request-blob", "hash": "ab", "message": "x"},
         "api-request-blob line whose message is not an object"),
        ({"type": "api-request-blob", "hash": "ab", "message": {"content": []}},
         "api-request-blob line whose message has no role"),
        ({"type": "api-request-shape", "shape": {}}, "api-request-shape line without a hash"),
    ],
)  # fmt: skip
def test_a_broken_record_line_is_skipped(
    tmp_path: Path, entry: dict[str, Any], reason: str
) -> None:
    s = Recorder()
    s.user("u1", None, "a")
    s.entry(entry)
    t = load(s, tmp_path)
    assert [(x.line, x.reason) for x in t.skipped] == [(2, reason)]


# --- the main thread's last request --------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "agent", "main"),
    [
        ("sdk", None, True),
        ("repl_main_thread", None, True),
        ("repl_main_thread:outputStyle:Explanatory", None, True),
        ("agent:builtin:general-purpose", "a0363d83b24a4a58e", False),
        ("hook_agent", "a1", False),
        ("compact", None, False),
    ],
)
def test_which_requests_are_the_main_thread(source: str, agent: str | None, main: bool) -> None:
    request = ClaudeCodeRequest(
        id="r",
        line=1,
        query_source=source,
        agent_id=agent,
        model="m",
        system=None,
        tools=None,
        messages=(),
        params={},
    )
    assert request.is_main_thread is main


def test_the_last_main_request_passes_over_subagents(tmp_path: Path) -> None:
    s, _, second = two_requests()
    everything = [message_hash(m) for m in second["messages"]]
    s.request(
        "req-3",
        second,
        everything,
        query_source="agent:builtin:general-purpose",
        agentId="a0363d83b24a4a58e",
    )
    t = load(s, tmp_path)
    chosen = t.last_main_request()
    assert chosen is not None
    assert chosen.id == "req-2"
    assert [r.is_main_thread for r in t.requests] == [True, True, False]


def test_no_last_main_request_when_the_newest_is_cut_or_unusable(tmp_path: Path) -> None:
    s, _, second = two_requests()
    everything = [message_hash(m) for m in second["messages"]]
    record = s.request("req-3", second, everything, cut={"kind": "tool-mark-address", "cuts": 1})
    record["cutRequestDigest"] = record.pop("requestDigest")
    s.lines[-1] = json.dumps(record)
    t = load(s, tmp_path)
    assert t.requests[-1].cut == {"kind": "tool-mark-address", "cuts": 1}
    assert t.requests[-1].verify()
    assert t.last_main_request() is None
    s.lines[-1] = json.dumps({**record, "shapeHash": "0" * 64, "cut": None})
    t = load(s, tmp_path)
    assert [r.id for r in t.requests] == ["req-1", "req-2"]
    assert t.last_main_request() is None


def test_a_session_without_records_has_no_requests(tmp_path: Path) -> None:
    s = Session()
    s.user("u1", None, "a")
    t = load(s, tmp_path)
    assert t.requests == ()
    assert t.last_main_request() is None


# --- the canonical text ------------------------------------------------------------------


def test_canonical_json_writes_what_javascript_writes() -> None:
    # Expected text and digests computed with Node's JSON.stringify, keys sorted by
    # Array.prototype.sort (UTF-16 code units).
    value = json.loads(
        '{"b": 1e-7, "a": [1.0, 1e21, 1152921504606846976, 123456.5, -0.0, 1e16],'
        ' "\\u00e9": "\\u2028\\u0001", "\\ud83e\\udd16": 1, "\\uffff": 2,'
        ' "cache_control": {"type": "ephemeral"}, "z": "\\ud800"}'
    )
    assert canonical_json(value, omit_cache_control=True) == (
        '{"a":[1,1e+21,1152921504606847000,123456.5,0,10000000000000000],"b":1e-7,'
        '"z":"\ud800","\u00e9":"\u2028\\u0001","\U0001f916":1,"\uffff":2}'
    )
    assert sha256_hex(canonical_json(value)) == (
        "1803387fd18aa53310171285c70f899e87d543217076abba565e0374e0e6370a"
    )
    assert sha256_hex(canonical_json(value, omit_cache_control=True)) == (
        "d993f3d7fc52b025935812e65f9bce6272108d35a15afdbbb6774d3e3677eec8"
    )
