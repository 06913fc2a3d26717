"""Claude Code's records of the requests it sent, rebuilt into whole requests.

Since 2.1.332 a Claude Code session file records every model request of the main
thread (a subagent's go to the subagent's own file) in three kinds of line:

- ``api-request-shape``: ``shapeHash`` and ``shape`` = ``{system, tools}``, the system
  blocks (without the billing block Claude Code adds at send time) and the tool
  definitions, written once per distinct shape;
- ``api-request-blob``: ``hash`` and ``message``, one message of a request, written
  once per distinct message;
- ``api-request``: ``id``, ``querySource``, ``agentId`` (subagents only), ``shapeHash``,
  ``params`` (``model``, ``betas``, ``max_tokens``, ``thinking``, …), ``thread``, and the
  message list as ``base`` + ``keep`` + ``tail``: the first ``keep`` messages of the
  request named ``base`` (the previous request of the same thread; no ``base`` means
  ``keep`` is 0), followed by the messages whose hashes ``tail`` lists. Then
  ``cacheControl``, the path and value of every ``cache_control`` marker of the request,
  and ``requestDigest`` (``cutRequestDigest`` when the messages were cut before
  recording, with a ``cut`` field saying how).

Hashes are SHA-256 of the canonical JSON of ``_canonical_json``, taken without
``cache_control``: a shape's of ``{"system": …, "tools": …}``, a message's of the message
with a string content written as one text block. Blobs and shapes are stored without
their markers; ``cacheControl`` puts them back.

A message is not written as a blob when the transcript's own lines already hold it:
Claude Code hashes each run of consecutive ``user`` lines, and of consecutive
``assistant`` lines of one ``message.id`` (a response logged block by block), as the
message ``{"content": [blocks so far], "role": …}``, after every line of the run. A
compaction boundary, a line that is not JSON and a message line without content end a
run. The rebuild looks tail hashes up among the blobs, then among those runs.

A request whose shape, base or messages are not in the file cannot be rebuilt; it is
left out and noted, never an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from memdir.transcripts._canonical_json import canonical_json, utf8
from memdir.transcripts._types import CacheControlMarker, ClaudeCodeRequest, SkippedLine

__all__ = ["REQUEST_RECORD_TYPES", "RequestRecords"]

REQUEST_RECORD_TYPES = frozenset({"api-request", "api-request-shape", "api-request-blob"})
"""The line types that make up a request record."""

_ROOTS = ("system", "tools", "messages")


class _UnusableError(Exception):
    """A request record that cannot be rebuilt; the message says why."""


class RequestRecords:
    """Collects a session file's request records and message runs, then rebuilds requests.

    Feed it every decoded line in file order (:meth:`note_line`, with None for a line that
    is not JSON) and every request record line (:meth:`add`), then call :meth:`build`.
    """

    def __init__(self) -> None:
        self._shapes: dict[str, Mapping[str, Any]] = {}
        self._blobs: dict[str, Mapping[str, Any]] = {}
        self._requests: list[tuple[int, Mapping[str, Any]]] = []
        # user/assistant entries and run breaks (None), in file order
        self._events: list[Mapping[str, Any] | None] = []

    def note_line(self, entry: Mapping[str, Any] | None) -> None:
        """Take note of a decoded line (None: not JSON) for the runs of message lines."""
        if entry is None:
            self._events.append(None)
            return
        kind = entry.get("type")
        if kind in ("user", "assistant"):
            self._events.append(entry)
        elif kind == "system" and entry.get("subtype") == "compact_boundary":
            self._events.append(None)

    def add(self, entry: Mapping[str, Any], line: int) -> str | None:
        """Take a request record line; returns why it is malformed, or None."""
        kind = entry.get("type")
        if kind == "api-request":
            self._requests.append((line, entry))
            return None
        if kind == "api-request-shape":
            key, value, what = entry.get("shapeHash"), entry.get("shape"), "shape"
        else:
            key, value, what = entry.get("hash"), entry.get("message"), "message"
        if not isinstance(key, str) or not key:
            return f"{kind} line without a hash"
        if not isinstance(value, Mapping):
            return f"{kind} line whose {what} is not an object"
        if kind == "api-request-blob" and not isinstance(value.get("role"), str):
            return f"{kind} line whose message has no role"
        store = self._shapes if kind == "api-request-shape" else self._blobs
        store.setdefault(key, value)
        return None

    def build(self) -> tuple[list[ClaudeCodeRequest], list[SkippedLine]]:
        """The rebuilt requests in file order, and the records that could not be rebuilt."""
        if not self._requests:
            return [], []
        runs = _runs(self._events)
        rebuilt: dict[str, list[Mapping[str, Any]]] = {}  # by id, markers not applied
        requests: list[ClaudeCodeRequest] = []
        notes: list[SkippedLine] = []
        for line, entry in self._requests:
            try:
                request, messages = self._rebuild(entry, line, runs, rebuilt)
            except _UnusableError as exc:
                notes.append(SkippedLine(line=line, reason=f"request not rebuilt: {exc}"))
                continue
            except RecursionError:
                notes.append(SkippedLine(line=line, reason="request not rebuilt: nested too deep"))
                continue
            rebuilt[request.id] = messages
            requests.append(request)
        return requests, notes

    def _rebuild(
        self,
        entry: Mapping[str, Any],
        line: int,
        runs: Mapping[str, tuple[str, list[Any], int]],
        rebuilt: Mapping[str, list[Mapping[str, Any]]],
    ) -> tuple[ClaudeCodeRequest, list[Mapping[str, Any]]]:
        request_id = _text(entry, "id")
        shape_hash = _text(entry, "shapeHash")
        shape = self._shapes.get(shape_hash)
        if shape is None:
            raise _UnusableError(
                f"its system and tools (shape {shape_hash[:12]}) are not in the file"
            )
        messages = _kept(entry, rebuilt) + [self._message(h, runs) for h in _hashes(entry)]

        params = entry.get("params")
        if not isinstance(params, Mapping):
            raise _UnusableError("its params are not an object")
        model = params.get("model")
        if not isinstance(model, str):
            raise _UnusableError("its params name no model")
        system = shape.get("system")
        tools = shape.get("tools")
        if system is not None and not isinstance(system, str | list):
            raise _UnusableError("its shape's system is neither text nor a list")
        if tools is not None and not isinstance(tools, list):
            raise _UnusableError("its shape's tools are not a list")

        markers = _markers(entry)
        body: dict[str, Any] = {
            "system": _without_markers(system),
            "tools": _without_markers(tools),
            "messages": list(messages),
        }
        fresh = {id(body), id(body["messages"])}
        for marker in markers:
            _apply(body, marker, fresh)

        digest = entry.get("requestDigest", entry.get("cutRequestDigest"))
        cut = entry.get("cut")
        withheld = entry.get("withheld")
        source, agent = entry.get("querySource"), entry.get("agentId")
        marked_system = body["system"]
        request = ClaudeCodeRequest(
            id=request_id,
            line=line,
            query_source=source if isinstance(source, str) else None,
            agent_id=agent if isinstance(agent, str) and agent else None,
            model=model,
            system=tuple(marked_system) if isinstance(marked_system, list) else marked_system,
            tools=None if body["tools"] is None else tuple(body["tools"]),
            messages=tuple(body["messages"]),
            params={k: v for k, v in params.items() if k != "model"},
            cache_control=tuple(markers),
            request_digest=digest if isinstance(digest, str) else None,
            cut=cut if isinstance(cut, Mapping) else None,
            withheld=tuple(w for w in withheld if isinstance(w, str))
            if isinstance(withheld, list)
            else (),
        )
        return request, messages

    def _message(
        self, digest: str, runs: Mapping[str, tuple[str, list[Any], int]]
    ) -> Mapping[str, Any]:
        blob = self._blobs.get(digest)
        if blob is not None:
            return _without_markers(blob)  # type: ignore[no-any-return]
        run = runs.get(digest)
        if run is None:
            raise _UnusableError(f"its message {digest[:12]} is not in the file")
        role, blocks, count = run
        return {"role": role, "content": _without_markers(blocks[:count])}


def _text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise _UnusableError(f"its record has no {key!r}")
    return value


def _hashes(entry: Mapping[str, Any]) -> list[str]:
    tail = entry.get("tail", [])
    if not isinstance(tail, list) or not all(isinstance(h, str) for h in tail):
        raise _UnusableError("its 'tail' is not a list of hashes")
    return tail


def _kept(
    entry: Mapping[str, Any], rebuilt: Mapping[str, list[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    """The messages a request keeps from the one before it in its thread."""
    keep = entry.get("keep", 0)
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
        raise _UnusableError("its 'keep' is not a count")
    base = entry.get("base")
    if base is None:
        if keep:
            raise _UnusableError("it keeps messages but names no base request")
        return []
    if not isinstance(base, str):
        raise _UnusableError("its 'base' is not a request id")
    earlier = rebuilt.get(base)
    if earlier is None:
        raise _UnusableError(f"its base request {base} is not in the file or was not rebuilt")
    if keep > len(earlier):
        raise _UnusableError(f"it keeps {keep} messages of a request that had {len(earlier)}")
    return earlier[:keep]


def _markers(entry: Mapping[str, Any]) -> list[CacheControlMarker]:
    raw = entry.get("cacheControl", [])
    if not isinstance(raw, list):
        raise _UnusableError("its 'cacheControl' is not a list")
    markers: list[CacheControlMarker] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise _UnusableError("a cache_control marker is not an object")
        path = item.get("path")
        if (
            not isinstance(path, list)
            or not path
            or path[0] not in _ROOTS
            or not all(isinstance(p, str | int) and not isinstance(p, bool) for p in path)
        ):
            raise _UnusableError(f"a cache_control marker has an unusable path: {path!r:.60}")
        markers.append(CacheControlMarker(path=tuple(path), value=item.get("value")))
    return markers


def _apply(body: dict[str, Any], marker: CacheControlMarker, fresh: set[int]) -> None:
    """Set the marker in ``body``, copying the objects on its path that are shared.

    ``fresh`` holds the ids of the objects this request owns already (copied before).
    """
    container: Any = body
    for step in marker.path:
        if not _has_step(container, step):
            raise _UnusableError(f"its cache_control marker at {_dotted(marker.path)} does not fit")
        child = container[step]
        if id(child) not in fresh:
            if isinstance(child, Mapping):
                child = dict(child)
            elif isinstance(child, list):
                child = list(child)
            else:
                raise _UnusableError(
                    f"its cache_control marker at {_dotted(marker.path)} does not fit"
                )
            fresh.add(id(child))
            container[step] = child
        container = child
    if not isinstance(container, dict):
        raise _UnusableError(f"its cache_control marker at {_dotted(marker.path)} does not fit")
    container["cache_control"] = marker.value


def _has_step(container: Any, step: str | int) -> bool:
    if isinstance(container, dict):
        return isinstance(step, str) and step in container
    return isinstance(container, list) and isinstance(step, int) and 0 <= step < len(container)


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path)


def _without_markers(value: Any) -> Any:
    """``value`` without any ``cache_control`` key, copied only where one was found."""
    if isinstance(value, Mapping):
        stripped = {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
        same = len(stripped) == len(value) and all(stripped[k] is value[k] for k in stripped)
        return value if same else stripped
    if isinstance(value, list):
        items = [_without_markers(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _runs(events: Sequence[Mapping[str, Any] | None]) -> dict[str, tuple[str, list[Any], int]]:
    """The message of every run prefix of the transcript's lines, by its hash.

    Each value is (role, the run's blocks, how many of them the prefix holds): the block
    list is shared by the prefixes of one run, so the index stays linear in the file.
    """
    index: dict[str, tuple[str, list[Any], int]] = {}
    role: str | None = None
    response: str | None = None
    blocks: list[Any] = []
    hasher: Any = None
    for entry in events:
        message = entry.get("message") if entry is not None else None
        if (
            not isinstance(message, Mapping)
            or not isinstance(message.get("role"), str)
            or message.get("content") is None
        ):
            hasher = None
            continue
        line_role: str = message["role"]
        line_id = message.get("id") if isinstance(message.get("id"), str) else None
        content = message["content"]
        if isinstance(content, str):
            parts: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            parts = content
        else:
            parts = [content]
        same_run = line_role == role and (
            line_role == "user" or (line_id is not None and line_id == response)
        )
        if hasher is None or not same_run:
            role, response, blocks = line_role, line_id, []
            hasher = hashlib.sha256(b'{"content":[')
        try:
            texts = [utf8(canonical_json(block, omit_cache_control=True)) for block in parts]
        except RecursionError:  # no request can name it: Claude Code could not hash it either
            hasher = None
            continue
        for block, text in zip(parts, texts, strict=True):
            if blocks:
                hasher.update(b",")
            hasher.update(text)
            blocks.append(block)
        prefix = hasher.copy()
        prefix.update(utf8(f'],"role":{canonical_json(line_role)}}}'))
        index.setdefault(prefix.hexdigest(), (line_role, blocks, len(blocks)))
    return index
