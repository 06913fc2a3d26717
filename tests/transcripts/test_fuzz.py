"""Whatever bytes a transcript file holds, loading it returns or raises TranscriptError."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.errors import TranscriptError
from memdir.transcripts import load_transcript

FIXTURE = (
    Path(__file__).parent.parent / "fixtures" / "claude-code-log" / "dag_compact_after_rewind.jsonl"
)

_json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


def _load(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    with contextlib.suppress(TranscriptError):
        load_transcript(path)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400))
def test_random_bytes(tmp_path: Path, data: bytes) -> None:
    _load(tmp_path / "x.jsonl", data)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_json)
def test_random_json_documents(tmp_path: Path, value: object) -> None:
    _load(tmp_path / "x.json", json.dumps(value).encode())


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    index=st.integers(min_value=0, max_value=11),
    key=st.sampled_from(
        ["uuid", "parentUuid", "logicalParentUuid", "message", "type", "isSidechain", "content"]
    ),
    value=_json,
)
def test_mutated_session_lines(tmp_path: Path, index: int, key: str, value: object) -> None:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[index])
    if key == "content" and isinstance(entry.get("message"), dict):
        entry["message"]["content"] = value
    else:
        entry[key] = value
    lines[index] = json.dumps(entry)
    _load(tmp_path / "s.jsonl", "\n".join(lines).encode())


@pytest.mark.parametrize("cut", [1, 50, 400, 1000, 2500])
def test_truncated_session_file(tmp_path: Path, cut: int) -> None:
    data = FIXTURE.read_bytes()[:cut]
    _load(tmp_path / "s.jsonl", data)


def _recorded_session() -> list[dict[str, object]]:
    from tests.transcripts.test_claude_code_requests import two_requests

    session = two_requests()[0]
    return [json.loads(line) for line in session.lines]


_RECORD_LINES = [i for i, e in enumerate(_recorded_session()) if str(e["type"]).startswith("api-")]
_RECORD_KEYS = (
    *("id", "base", "keep", "tail", "shapeHash", "params", "cacheControl", "requestDigest"),
    *("cut", "withheld", "querySource", "agentId", "hash", "message", "shape"),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    index=st.sampled_from(_RECORD_LINES),
    key=st.sampled_from(_RECORD_KEYS),
    value=_json,
)
def test_mutated_request_records(tmp_path: Path, index: int, key: str, value: object) -> None:
    entries = _recorded_session()
    entries[index][key] = value
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries), encoding="utf-8")
    transcript = load_transcript(path)
    for request in transcript.requests:
        request.verify()
        request.body()
    transcript.last_main_request()
