"""Prompt-cache accounting for the fake provider servers, by each provider's documented rules.

Both fakes estimate tokens as characters / 4 of each piece's compact JSON, so a test can
predict the numbers without a tokenizer. Everything else follows the providers' prompt
caching pages, so that a client which breaks its cache sees the symptom it would see in
production (``cache_read_input_tokens`` or ``cached_tokens`` drops), and a client that
relies on a rule the provider does not have gets no credit for it.

Anthropic (:class:`AnthropicCache`):

- The prompt is a chain of blocks in the order tools, system, messages; an entry is the
  hash of the chain up to and including one block. The model heads the chain; ``speed``
  opens the system level; ``tool_choice``, the ``thinking`` settings and the number of
  images in the messages open the messages level. So a changed tool misses everything, a
  changed ``tool_choice``, thinking budget or image count misses the messages only.
- Blocks are hashed as sent: key order counts (the docs warn that re-ordered JSON keys
  break the cache); ``cache_control`` markers do not.
- Entries are written only at breakpoints (a block with ``cache_control``, or the last
  cacheable block for a top-level ``cache_control``) whose prefix reaches the model's
  minimum (:func:`memdir.cost.model_family`). Reads look back from each breakpoint over at
  most :data:`LOOKBACK_BLOCKS` positions, the breakpoint itself counted as the first.
- An entry lives 5 minutes (``ttl: "1h"``: an hour) on the server's clock; each hit and
  each rewrite starts its lifetime again.
- Models that drop earlier thinking (``keeps_thinking=False``) process a conversation as
  if the thinking blocks of assistant turns before the last plain user message were never
  there: they are left out of the key and of the token count.

OpenAI (:class:`OpenAICache`): automatic, for prompts from the model's minimum (1,024
tokens) up, in steps of :data:`OPENAI_CACHE_STEP` tokens; a request can only reach prompts
routed to its machine, modelled as a partition by model, ``prompt_cache_key`` and the
prompt's first :data:`OPENAI_ROUTING_CHARS` characters. A prompt unused for the model's
idle lifetime (5 minutes), or older than its longest (an hour), is evicted;
``prompt_cache_retention: "24h"`` keeps it a day on the models that take it
(:attr:`~memdir.cost.ModelFamily.extended_cache_retention`).

Both count a request's prompt the same way for the context window
(:func:`anthropic_prompt_tokens`, :func:`openai_prompt_tokens`), which the servers
enforce as the providers do.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from memdir.cost import ModelFamily, Provider, model_family

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "OPENAI_CACHE_STEP",
    "OPENAI_EXTENDED_SECONDS",
    "OPENAI_ROUTING_CHARS",
    "TTL_SECONDS",
    "AnthropicCache",
    "AnthropicUsage",
    "Clock",
    "OpenAICache",
    "OpenAIUsage",
    "anthropic_prompt_tokens",
    "estimate_tokens",
    "openai_prompt_tokens",
    "wire_json",
]

Clock: TypeAlias = Callable[[], float]
"""A monotonic clock in seconds: ``time.monotonic`` or a :class:`~memdir.testing.FakeClock`."""

LOOKBACK_BLOCKS = 20
"""Positions Anthropic checks per breakpoint for an earlier entry, the breakpoint being the
first ("at most 20 positions per breakpoint, counting the breakpoint itself")."""
MAX_BREAKPOINTS = 4
"""Anthropic refuses a request with more ``cache_control`` blocks than this; a top-level
(automatic) ``cache_control`` takes one of them."""
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
"""Anthropic's entry lifetimes by the ``ttl`` of a ``cache_control``; ``5m`` by default."""
OPENAI_CACHE_STEP = 128
"""OpenAI reports cache hits in increments of 128 tokens."""
OPENAI_ROUTING_CHARS = 1024
"""OpenAI routes a request by a hash of its first ~256 tokens: 1,024 characters here."""
OPENAI_EXTENDED_SECONDS = 86_400.0
"""How long ``prompt_cache_retention: "24h"`` keeps a prompt, idle or not."""

_DEFAULT_TTL = "5m"
_LONGEST_TTL = max(TTL_SECONDS, key=TTL_SECONDS.__getitem__)
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_LEVELS = ("tools", "system", "messages")
# Characters compared per slice when looking for the first difference of two prompts:
# big enough that a 200K-character prompt takes a few dozen C-level comparisons.
_COMPARE_CHUNK = 4096


# One encoder for every block: json.dumps would build one per call, a third of the cost.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def wire_json(value: object) -> str:
    """``value`` as compact JSON with its keys in the order they came (as sent, not sorted)."""
    return _ENCODER.encode(value)


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated as characters / 4 rounded up."""
    return math.ceil(len(text) / 4)


def _family(body: Mapping[str, Any], provider: Provider) -> ModelFamily:
    model = body.get("model")
    return model_family(model if isinstance(model, str) else "", provider)


# Anthropic.


@dataclass(frozen=True, kw_only=True)
class AnthropicUsage:
    """The input side of an Anthropic ``usage`` object."""

    input_tokens: int
    """Tokens neither read from nor written to the cache (those after the last write)."""
    cache_read_input_tokens: int
    """Tokens of the longest cached prefix this request hit."""
    cache_creation_input_tokens: int
    """Tokens this request wrote to the cache beyond what it read, at either lifetime."""
    cache_creation_1h_input_tokens: int = 0
    """Of :attr:`cache_creation_input_tokens`, those written with the one-hour lifetime."""

    @property
    def cache_creation_5m_input_tokens(self) -> int:
        """Of :attr:`cache_creation_input_tokens`, those written with the 5-minute lifetime."""
        return self.cache_creation_input_tokens - self.cache_creation_1h_input_tokens


@dataclass(frozen=True)
class _Block:
    """One cacheable block of a Messages request, as the cache sees it."""

    path: str
    """Where it sits in the request, for error messages (``messages.2.content.0``)."""
    level: Literal["tools", "system", "messages"]
    """Which level of the cache hierarchy it belongs to."""
    place: str
    """Its place in the request as the key has it, a JSON list left open: the level, and for
    a message block the message's index and role, so message boundaries are in the key."""
    content: object
    """The block as sent, its ``cache_control`` markers left out."""
    markers: tuple[object, ...]
    """The ``cache_control`` values it carries (a tool result's inner items too), in order."""
    markable: bool
    """Whether the API lets it carry a marker: not thinking, not an empty text."""

    def key_and_tokens(self) -> tuple[bytes, int]:
        """What the chain hashes for the block, and its tokens (characters / 4 of its JSON).

        Computed only when the cache is consulted: checking markers needs neither.
        """
        text = wire_json(self.content)
        return f"{self.place},{text}]".encode(), estimate_tokens(text)


def _strip_markers(block: object) -> tuple[object, tuple[object, ...]]:
    """``block`` without its ``cache_control`` key(s), and the markers it had.

    A marker is not part of the cache key: moving a breakpoint must not change the prefix.
    Tool results may carry markers on their inner content items too. ``cache_control:
    null`` is no marker (the API takes it as absent).
    """
    if not isinstance(block, dict):
        return block, ()
    if "cache_control" not in block and block.get("type") != "tool_result":
        return block, ()  # nothing to take out: the block itself, uncopied
    markers: list[object] = []
    if block.get("cache_control") is not None:
        markers.append(block["cache_control"])
    out = {k: v for k, v in block.items() if k != "cache_control"}
    inner = out.get("content")
    if out.get("type") == "tool_result" and isinstance(inner, list):
        items = [_strip_markers(item) for item in inner]
        out["content"] = [item for item, _ in items]
        markers += [marker for _, found in items for marker in found]
    return out, tuple(markers)


def _markable(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return kind not in _UNMARKABLE and not (kind == "text" and not block.get("text"))


def _block(
    path: str, level: Literal["tools", "system", "messages"], place: str, block: object
) -> _Block:
    stripped, markers = _strip_markers(block)
    return _Block(
        path=path,
        level=level,
        place=place,
        content=stripped,
        markers=markers,
        markable=_markable(block),
    )


def _place(*where: object) -> str:
    """The opening of a block's key: ``where`` as a JSON list, its closing bracket left off."""
    return wire_json(list(where))[:-1]


def _as_blocks(content: object) -> list[Any]:
    """A string counts as one text block, so it matches the same text sent as a list."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _is_plain_user(message: object) -> bool:
    """A user message with something besides tool results: it starts a new turn."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    blocks = _as_blocks(message.get("content"))
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in blocks)


def _message_blocks(messages: Sequence[Any], *, keeps_thinking: bool) -> list[_Block]:
    # Models that keep only the current turn's thinking process everything before the
    # last plain user message as if its thinking blocks were never there.
    cut = -1
    if not keeps_thinking:
        cut = max((i for i, m in enumerate(messages) if _is_plain_user(m)), default=-1)
    out: list[_Block] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        place = _place("message", i, role)
        for position, block in enumerate(_as_blocks(message.get("content"))):
            kind = block.get("type") if isinstance(block, dict) else None
            if i < cut and role == "assistant" and kind in _UNMARKABLE:
                continue
            out.append(_block(f"messages.{i}.content.{position}", "messages", place, block))
    return out


def _anthropic_blocks(
    body: Mapping[str, Any], *, keeps_thinking: bool = True, ignored_system: Sequence[str] = ()
) -> list[_Block]:
    """The cacheable blocks of a Messages request, in the provider's cache order; system
    text blocks that start with one of ``ignored_system`` are left out."""
    out: list[_Block] = []
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        out.append(_block(f"tools.{i}", "tools", _place("tool"), tool))
    for i, block in enumerate(_as_blocks(body.get("system"))):
        text = block.get("text") if isinstance(block, Mapping) else None
        if ignored_system and isinstance(text, str) and text.startswith(tuple(ignored_system)):
            continue
        out.append(_block(f"system.{i}", "system", _place("system"), block))
    messages = body.get("messages")
    if isinstance(messages, list):
        out += _message_blocks(messages, keeps_thinking=keeps_thinking)
    return out


def anthropic_prompt_tokens(body: Mapping[str, Any], *, keeps_thinking: bool = True) -> int:
    """The prompt tokens of a Messages request, as the context window counts them: every
    block (tools, system, messages) at characters / 4 of its compact JSON, markers left
    out. On models that keep only the current turn's thinking, earlier turns' thinking
    blocks do not count (Anthropic leaves them out of the window)."""
    blocks = _anthropic_blocks(body, keeps_thinking=keeps_thinking)
    return sum(block.key_and_tokens()[1] for block in blocks)


def _image_count(blocks: Sequence[_Block]) -> int:
    """Images in the messages: image blocks, and images inside tool results."""
    count = 0
    for block in blocks:
        content = block.content
        if block.level != "messages" or not isinstance(content, dict):
            continue
        kind = content.get("type")
        if kind == "image":
            count += 1
        elif kind == "tool_result" and isinstance(content.get("content"), list):
            items = content["content"]
            count += sum(isinstance(i, dict) and i.get("type") == "image" for i in items)
    return count


def _level_context(body: Mapping[str, Any], level: str, images: int) -> bytes:
    """What opens a level of the chain: the settings whose change invalidates it and after.

    The docs: a ``speed`` toggle invalidates system and messages; ``tool_choice``, the
    thinking parameters and adding or removing images invalidate the messages only.
    """
    if level == "tools":
        context: dict[str, object] = {"model": body.get("model")}
    elif level == "system":
        context = {"speed": body.get("speed") or "standard"}
    else:
        # A setting left out is its default: the same request, the same cache.
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "disabled":
            thinking = None
        context = {
            "tool_choice": body.get("tool_choice") or {"type": "auto"},
            "thinking": thinking,
            "images": images,
        }
    return wire_json([level, context]).encode()


def _automatic_point(body: Mapping[str, Any], blocks: Sequence[_Block]) -> int | None:
    """Where a top-level ``cache_control`` puts its breakpoint: the last markable block."""
    if body.get("cache_control") is None:
        return None
    return next((i for i in range(len(blocks) - 1, -1, -1) if blocks[i].markable), None)


def _marker_error(path: str, marker: object) -> str | None:
    """The API's refusal of a malformed ``cache_control`` value, or None."""
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        return f"{path}.type: Input should be 'ephemeral'"
    ttl = marker.get("ttl", _DEFAULT_TTL)
    if ttl not in TTL_SECONDS:
        return f"{path}.ttl: Input should be '5m' or '1h'"
    return None


def _ttl(marker: object) -> str:
    ttl = marker.get("ttl", _DEFAULT_TTL) if isinstance(marker, Mapping) else _DEFAULT_TTL
    return ttl if isinstance(ttl, str) and ttl in TTL_SECONDS else _DEFAULT_TTL


def _ordering_error(ttls: Sequence[str]) -> str | None:
    """The API requires longer lifetimes before shorter ones, in cache order."""
    for earlier, later in itertools.pairwise(ttls):
        if TTL_SECONDS[later] > TTL_SECONDS[earlier]:
            return (
                f"cache_control TTL ordering: a ttl='{later}' cache_control block must not "
                f"come after a ttl='{earlier}' block"
            )
    return None


@dataclass(frozen=True)
class _Chain:
    """One request's prefix hashes and the breakpoints where it may write."""

    fingerprints: list[bytes]
    """The chain's hash after each block."""
    prefix_tokens: list[int]
    """Tokens from the start of the prompt up to and including each block."""
    points: list[tuple[int, str]]
    """Each breakpoint: the block's index and the lifetime (``5m``, ``1h``) it asks for."""

    @property
    def total(self) -> int:
        """Every input token of the request."""
        return self.prefix_tokens[-1] if self.prefix_tokens else 0


def _chain(body: Mapping[str, Any], blocks: Sequence[_Block]) -> _Chain:
    digest = b""
    opened = 0  # how many levels have their context in the chain so far
    fingerprints: list[bytes] = []
    prefix_tokens: list[int] = []
    points: list[tuple[int, str]] = []
    total = 0
    automatic = _automatic_point(body, blocks)
    images = _image_count(blocks)
    for index, block in enumerate(blocks):
        # Each level's context enters the chain at its place, whether or not the levels
        # before it have blocks: no tools and no system still hash the model first.
        while opened <= _LEVELS.index(block.level):
            context = _level_context(body, _LEVELS[opened], images)
            digest = hashlib.sha256(digest + context).digest()
            opened += 1
        key, tokens = block.key_and_tokens()
        digest = hashlib.sha256(digest + key).digest()
        total += tokens
        fingerprints.append(digest)
        prefix_tokens.append(total)
        ttls = [_ttl(m) for m in block.markers]
        if index == automatic:
            ttls.append(_ttl(body["cache_control"]))
        if ttls:
            points.append((index, max(ttls, key=TTL_SECONDS.__getitem__)))
    return _Chain(fingerprints=fingerprints, prefix_tokens=prefix_tokens, points=points)


@dataclass
class _Entry:
    """One prefix in Anthropic's cache."""

    ttl: str
    """Its lifetime (``5m`` or ``1h``): how long after its last use it expires."""
    expires: float
    """When it expires, on the cache's clock."""


class AnthropicCache:
    """Anthropic's prompt cache: prefixes ending at ``cache_control`` breakpoints.

    ``min_tokens`` and ``keeps_thinking`` override, for every model, what
    :func:`memdir.cost.model_family` says of the request's ``model``; None leaves it to
    the table. Lifetimes are measured on ``clock``. Not thread-safe; the server calls it
    under its lock.
    """

    def __init__(
        self,
        min_tokens: int | None = None,
        *,
        keeps_thinking: bool | None = None,
        clock: Clock | None = None,
        ignored_system_prefixes: Sequence[str] = (),
    ) -> None:
        self._min_tokens = min_tokens
        self._keeps_thinking = keeps_thinking
        self._ignored_system = tuple(ignored_system_prefixes)
        self._clock = clock or time.monotonic
        self._entries: dict[bytes, _Entry] = {}

    def reset(self) -> None:
        """Forget every cache entry."""
        self._entries.clear()

    def entry_count(self) -> int:
        """How many entries the cache holds: each request drops the expired ones first."""
        return len(self._entries)

    def breakpoints(self, body: Mapping[str, Any]) -> int:
        """How many ``cache_control`` markers ``body`` holds, a top-level one included."""
        explicit = sum(len(block.markers) for block in _anthropic_blocks(body))
        return explicit + (body.get("cache_control") is not None)

    def refusal(self, body: Mapping[str, Any]) -> str | None:
        """Why Anthropic would refuse the markers of ``body`` with a 400, or None."""
        blocks = _anthropic_blocks(body)
        marked = [(f"{b.path}.cache_control", m) for b in blocks for m in b.markers]
        automatic = body.get("cache_control")
        if automatic is not None:
            marked.append(("cache_control", automatic))
        for path, marker in marked:
            error = _marker_error(path, marker)
            if error is not None:
                return error
        if len(marked) > MAX_BREAKPOINTS:
            return (
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marked)}."
            )
        point = _automatic_point(body, blocks)
        if point is not None and any(_ttl(m) != _ttl(automatic) for m in blocks[point].markers):
            return (
                f"{blocks[point].path}.cache_control: the explicit cache_control on the last "
                "cacheable block has a different TTL from the top-level cache_control"
            )
        return _ordering_error([_ttl(marker) for _, marker in marked])

    def account(self, body: Mapping[str, Any]) -> AnthropicUsage:
        """Read from and write to the cache for one request, and report its input usage."""
        now = self._clock()
        self._evict(now)
        family = _family(body, "anthropic")
        keeps = family.keeps_thinking if self._keeps_thinking is None else self._keeps_thinking
        minimum = family.min_cache_tokens if self._min_tokens is None else self._min_tokens
        blocks = _anthropic_blocks(body, keeps_thinking=keeps, ignored_system=self._ignored_system)
        chain = _chain(body, blocks)

        # Reads first, so that no breakpoint reads what another of the same request writes.
        read_end = -1
        for point, _ in chain.points:
            hit = self._look_back(chain, point, now)
            read_end = max(read_end, hit)
        written = [(i, ttl) for i, ttl in chain.points if chain.prefix_tokens[i] >= minimum]
        for i, ttl in written:
            self._write(chain.fingerprints[i], ttl, now)
        return _bill(chain, read_end, [(i, ttl) for i, ttl in written if i > read_end])

    def _look_back(self, chain: _Chain, point: int, now: float) -> int:
        """The latest position within the window ending at ``point`` holding an entry
        (refreshed, since it is read), or -1."""
        for end in range(point, max(point - LOOKBACK_BLOCKS + 1, 0) - 1, -1):
            entry = self._entries.get(chain.fingerprints[end])
            if entry is not None and entry.expires > now:
                entry.expires = now + TTL_SECONDS[entry.ttl]
                return end
        return -1

    def _write(self, fingerprint: bytes, ttl: str, now: float) -> None:
        entry = self._entries.get(fingerprint)
        if entry is not None and entry.expires > now and TTL_SECONDS[entry.ttl] > TTL_SECONDS[ttl]:
            ttl = entry.ttl  # a rewrite keeps the longer of the two lifetimes
        self._entries[fingerprint] = _Entry(ttl=ttl, expires=now + TTL_SECONDS[ttl])

    def _evict(self, now: float) -> None:
        expired = [key for key, entry in self._entries.items() if entry.expires <= now]
        for key in expired:
            del self._entries[key]


def _bill(chain: _Chain, read_end: int, writes: Sequence[tuple[int, str]]) -> AnthropicUsage:
    """Usage by Anthropic's rule for mixed lifetimes.

    A is the prefix read (0 without a hit), B the prefix at the last one-hour breakpoint
    written after A (else A), C the prefix at the last breakpoint written after A (else A):
    A is read, B - A written for an hour, C - B for five minutes, the rest plain input.
    """
    read = chain.prefix_tokens[read_end] if read_end >= 0 else 0
    long_end = max(
        (chain.prefix_tokens[i] for i, ttl in writes if ttl == _LONGEST_TTL), default=read
    )
    end = chain.prefix_tokens[writes[-1][0]] if writes else read
    return AnthropicUsage(
        input_tokens=chain.total - end,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=end - read,
        cache_creation_1h_input_tokens=long_end - read,
    )


# OpenAI.


@dataclass(frozen=True, kw_only=True)
class OpenAIUsage:
    """The input side of an OpenAI ``usage`` object."""

    prompt_tokens: int
    """Every prompt token."""
    cached_tokens: int
    """Prompt tokens served from the cache (``prompt_tokens_details.cached_tokens``)."""


def _openai_prompt_text(body: Mapping[str, Any]) -> str:
    """The text OpenAI's cache compares: ``tools`` then each message, keys as sent."""
    parts: list[str] = []
    tools = body.get("tools")
    if tools:
        parts.append(wire_json(tools))
    messages = body.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        parts.extend(wire_json(m) for m in messages)
    return "".join(parts)


def openai_prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt tokens of a Chat Completions request: characters / 4 of the compact JSON
    of its ``tools`` and messages, the ``prompt_tokens`` the server reports."""
    return estimate_tokens(_openai_prompt_text(body))


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``, in C-speed slices."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low = 0  # a[:low] == b[:low]; find the first chunk that differs, then bisect it
    while a[low : min(low + _COMPARE_CHUNK, n)] == b[low : min(low + _COMPARE_CHUNK, n)]:
        low += _COMPARE_CHUNK
    high = min(low + _COMPARE_CHUNK, n)  # a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid
    return low


@dataclass
class _Prompt:
    """One earlier prompt in OpenAI's cache."""

    born: float
    """When its oldest part was first written: a prompt that extends one it read from
    inherits that one's birth, so a prefix in constant use still goes at the longest age."""
    used: float
    """When a request last wrote or read it."""
    idle: float
    """Seconds unused after which it is evicted."""
    longest: float | None
    """Seconds after :attr:`born` at which it is evicted, used or not; None for no bound."""

    def alive(self, now: float) -> bool:
        """Whether it is still in the cache at ``now``."""
        if now - self.used >= self.idle:
            return False
        return self.longest is None or now - self.born < self.longest


@dataclass
class _Partition:
    """The prompts one cache machine holds: sorted, so the best match is a neighbour."""

    texts: list[str] = field(default_factory=list)
    """Every live prompt's text, in sorted order."""
    prompts: dict[str, _Prompt] = field(default_factory=dict)
    """Each text's lifetime bookkeeping."""

    def best_match(self, text: str) -> tuple[int, _Prompt | None]:
        """The longest prefix ``text`` shares with a prompt held here, and that prompt.

        In sorted order the prompt sharing the longest prefix with ``text`` is next to
        where ``text`` would go, so two comparisons replace one per prompt.
        """
        at = bisect.bisect_left(self.texts, text)
        best: tuple[int, _Prompt | None] = (0, None)
        for neighbour in self.texts[max(at - 1, 0) : at + 1]:
            shared = _common_prefix(text, neighbour)
            if shared > best[0]:
                best = (shared, self.prompts[neighbour])
        return best

    def remember(self, text: str, prompt: _Prompt) -> None:
        """Hold ``text``; a prompt held already keeps its birth and the longer lifetime."""
        held = self.prompts.get(text)
        if held is None:
            bisect.insort(self.texts, text)
            self.prompts[text] = prompt
            return
        held.used = prompt.used
        held.born = min(held.born, prompt.born)
        held.idle = max(held.idle, prompt.idle)
        if held.longest is not None:
            held.longest = None if prompt.longest is None else max(held.longest, prompt.longest)

    def evict(self, now: float) -> None:
        """Drop every prompt that is no longer alive at ``now``."""
        dead = {text for text, prompt in self.prompts.items() if not prompt.alive(now)}
        if dead:
            self.texts = [text for text in self.texts if text not in dead]
            for text in dead:
                del self.prompts[text]


_PartitionKey: TypeAlias = tuple[str | None, str | None, str]


class OpenAICache:
    """OpenAI's automatic prompt cache: the longest prefix shared with a live earlier prompt
    routed to the same machine, in 128-token steps.

    ``min_tokens`` overrides, for every model, what :func:`memdir.cost.model_family` says
    of the request's ``model`` (None leaves it to the table). Lifetimes are measured on
    ``clock``. Not thread-safe; the server calls it under its lock.
    """

    def __init__(self, min_tokens: int | None = None, *, clock: Clock | None = None) -> None:
        self._min_tokens = min_tokens
        self._clock = clock or time.monotonic
        self._partitions: dict[_PartitionKey, _Partition] = {}

    def reset(self) -> None:
        """Forget every earlier prompt."""
        self._partitions.clear()

    def entry_count(self) -> int:
        """How many prompts the cache holds: each request drops the evicted ones first."""
        return sum(len(partition.prompts) for partition in self._partitions.values())

    def account(self, body: Mapping[str, Any]) -> OpenAIUsage:
        """Compare one request with the live prompts of its partition, then remember it."""
        now = self._clock()
        self._evict(now)
        family = _family(body, "openai")
        minimum = family.min_cache_tokens if self._min_tokens is None else self._min_tokens
        text = _openai_prompt_text(body)
        partition = self._partitions.setdefault(_partition_key(body, text), _Partition())
        shared, source = partition.best_match(text)
        cached = (shared // 4) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
        if cached == 0 or cached < minimum:
            cached, source = 0, None  # too short to be read: no hit, nothing kept alive
        if source is not None:
            source.used = now  # a hit keeps the prompt it read from alive
        partition.remember(text, _new_prompt(body, family, now, source))
        return OpenAIUsage(prompt_tokens=estimate_tokens(text), cached_tokens=cached)

    def _evict(self, now: float) -> None:
        for key, partition in list(self._partitions.items()):
            partition.evict(now)
            if not partition.prompts:
                del self._partitions[key]


def _partition_key(body: Mapping[str, Any], text: str) -> _PartitionKey:
    """Which cache machine a request reaches: model, ``prompt_cache_key``, opening text."""
    model = body.get("model")
    key = body.get("prompt_cache_key")
    return (
        model if isinstance(model, str) else None,
        key if isinstance(key, str) else None,
        text[:OPENAI_ROUTING_CHARS],
    )


def _new_prompt(
    body: Mapping[str, Any], family: ModelFamily, now: float, source: _Prompt | None
) -> _Prompt:
    # Only the models OpenAI lists take the 24-hour retention; on the others the request
    # is served with the in-memory lifetime (the page documents no refusal).
    if body.get("prompt_cache_retention") == "24h" and family.extended_cache_retention:
        idle: float = OPENAI_EXTENDED_SECONDS
        longest: float | None = OPENAI_EXTENDED_SECONDS
    else:
        idle, longest = family.cache_ttl_seconds, family.cache_max_seconds
    born = source.born if source is not None else now
    return _Prompt(born=born, used=now, idle=idle, longest=longest)
