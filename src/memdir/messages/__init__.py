"""Conversations as memdir sees them: :class:`Message` and its content blocks.

Converters read them from Anthropic (:func:`messages_from_anthropic`) and OpenAI
(:func:`messages_from_openai`) messages, or from any mix of both and of the SDKs' message
objects (:func:`messages_from_native`), and write them back.
"""

from memdir.messages._anthropic import (
    message_from_anthropic,
    message_to_anthropic,
    messages_from_anthropic,
    messages_to_anthropic,
)
from memdir.messages._model import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    derive_uuid,
    model_visible,
    with_derived_uuids,
)
from memdir.messages._native import AnyMessage, SupportsModelDump, messages_from_native
from memdir.messages._openai import messages_from_openai, messages_to_openai

__all__ = [
    "AnyMessage",
    "ContentBlock",
    "ImageBlock",
    "Message",
    "OtherBlock",
    "Role",
    "SupportsModelDump",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "derive_uuid",
    "message_from_anthropic",
    "message_to_anthropic",
    "messages_from_anthropic",
    "messages_from_native",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
    "model_visible",
    "with_derived_uuids",
]
