"""The conversation model: messages and their content blocks.

Everything memdir reads is turned into these values first, whatever the source format.
They are immutable; a block's ``extra`` keeps wire fields memdir does not model (such as
``cache_control`` or ``citations``) so that converting back gives the request that came
in, byte for byte — the prompt cache depends on it.
"""

from __future__ import annotations

import dataclasses
import json
import uuid as _uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

__all__ = [
    "ContentBlock",
    "ImageBlock",
    "Message",
    "OtherBlock",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "derive_uuid",
    "model_visible",
    "with_derived_uuids",
]

Role: TypeAlias = Literal["user", "assistant", "system", "developer"]


@dataclass(frozen=True, kw_only=True)
class TextBlock:
    """Plain text."""

    text: str
    """The text itself."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Wire fields kept verbatim (``cache_control``, ``citations``, …)."""


@dataclass(frozen=True, kw_only=True)
class ThinkingBlock:
    """The model's visible reasoning, with the provider's signature when there is one."""

    thinking: str
    """The reasoning text."""
    signature: str | None = None
    """Anthropic's signature over the thinking; needed to send the block back."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Wire fields kept verbatim."""


@dataclass(frozen=True, kw_only=True)
class ImageBlock:
    """An image, either inline (base64 ``data``) or by ``url``."""

    media_type: str | None = None
    """MIME type of inline data, e.g. ``image/png``."""
    data: str | None = None
    """Base64-encoded bytes, for an inline image."""
    url: str | None = None
    """Where the image lives, for an image given by address."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Wire fields kept verbatim (OpenAI's ``detail``, Anthropic's ``cache_control``)."""


@dataclass(frozen=True, kw_only=True)
class ToolUseBlock:
    """A call the assistant made to a tool."""

    id: str
    """The call id that the matching :class:`ToolResultBlock` names."""
    name: str
    """The tool's name."""
    input: Mapping[str, Any]
    """The arguments, as a mapping."""
    raw_input: str | None = field(default=None, compare=False)
    """The arguments as the wire carried them, when that was JSON text (OpenAI).

    Kept so a round trip reproduces the exact text; ignored when it no longer decodes to
    ``input``. When the text was not valid JSON, ``input`` is empty and this holds it.
    """
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Wire fields kept verbatim."""


@dataclass(frozen=True, kw_only=True)
class ToolResultBlock:
    """What a tool returned, sent back to the model in a user message."""

    tool_use_id: str
    """The id of the :class:`ToolUseBlock` this answers."""
    content: str | tuple[TextBlock | ImageBlock, ...] = ""
    """The result: a string, or text and image blocks."""
    is_error: bool = False
    """Whether the tool failed."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Wire fields kept verbatim (including an explicit ``is_error`` of ``None``)."""

    @property
    def text(self) -> str:
        """The result's text, with image parts left out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, kw_only=True)
class OtherBlock:
    """A block of a type memdir does not model (``document``, ``redacted_thinking``, …).

    Kept whole so that nothing is lost on the way through.
    """

    type: str
    """The block's wire ``type``."""
    data: Mapping[str, Any]
    """The whole block as it arrived."""


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock | OtherBlock
)


def _new_uuid() -> str:
    return str(_uuid.uuid4())


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message of a conversation.

    ``uuid`` identifies the message for the extractor's cursor: it is the transcript's own
    id where the format has one, and derived from the conversation where it does not, so
    that reading the same conversation twice gives the same ids.
    """

    role: Role
    """Who speaks. ``system`` and ``developer`` come only from OpenAI-style input."""
    content: tuple[ContentBlock, ...]
    """The blocks, in order."""
    uuid: str = field(default_factory=_new_uuid)
    """Stable id of this message."""
    timestamp: datetime | None = None
    """When the message was written, where the source says."""
    is_meta: bool = False
    """Injected by the harness (a reminder, a caveat), not typed by a person."""
    is_compact_summary: bool = False
    """The synthetic summary that replaced earlier messages at a compaction."""
    is_sidechain: bool = False
    """Part of a subagent's conversation, not the main thread."""
    string_content: bool = False
    """The wire carried the content as a bare string rather than a list of blocks.

    Only meaningful when ``content`` is a single text block; it lets conversion back to
    the wire reproduce the original shape exactly.
    """
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Message-level wire fields kept verbatim (OpenAI's ``name`` or ``refusal``, …)."""

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        """A user message holding ``text``."""
        return cls(role="user", content=(TextBlock(text=text),), **kwargs)

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> Message:
        """An assistant message holding ``text``."""
        return cls(role="assistant", content=(TextBlock(text=text),), **kwargs)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines; tool calls, results and thinking left out."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls in this message, in call order."""
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        """The tool results in this message, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    @property
    def is_tool_result(self) -> bool:
        """A user message that carries only tool results (not something a person typed)."""
        return (
            self.role == "user"
            and bool(self.content)
            and all(isinstance(b, ToolResultBlock) for b in self.content)
        )


def model_visible(messages: Iterable[Message]) -> list[Message]:
    """The messages a model sees: user and assistant ones, tool results and meta included."""
    return [m for m in messages if m.role in ("user", "assistant")]


# Fixed namespace for derived ids: the same conversation gives the same ids on any machine.
_UUID_NAMESPACE = _uuid.UUID("6f1c1d0e-3b9a-5c59-9d43-0b6de1a4c2f7")


def _semantic(value: Any) -> Any:
    """A JSON-able form of a block or value, without the fields excluded from equality."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"_": type(value).__name__}
        for f in dataclasses.fields(value):
            if f.compare:
                out[f.name] = _semantic(getattr(value, f.name))
        return out
    if isinstance(value, Mapping):
        return {str(k): _semantic(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_semantic(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def derive_uuid(previous: str | None, message: Message) -> str:
    """A deterministic id for ``message``, given the id of the message before it.

    The id depends on the message's role and content (not on wire details such as
    ``cache_control``, nor on its timestamp or flags) and on everything before it, so the
    same conversation — or the same conversation with more messages appended — gives the
    same ids, and two identical messages at different places get different ones.
    """
    payload = json.dumps(
        [message.role, _semantic(message.content)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    # A lone surrogate (from a JSON "\ud800" escape) has no UTF-8 form: escape it rather
    # than fail. Text that encodes as it is keeps the id it always had.
    name = f"{previous or ''}\n{payload}".encode("utf-8", "backslashreplace").decode("utf-8")
    return str(_uuid.uuid5(_UUID_NAMESPACE, name))


def with_derived_uuids(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every uuid replaced by :func:`derive_uuid` along the chain."""
    out: list[Message] = []
    previous: str | None = None
    for message in messages:
        previous = derive_uuid(previous, message)
        out.append(dataclasses.replace(message, uuid=previous))
    return out
