"""ExtractMemories: the background memory agent that runs after each turn.

:class:`MemoryExtractor` is the whole state machine; :class:`TurnContext` is what a host
reports at the end of each turn; :class:`MemorySaved` is the notice for the user.
:class:`MemoryBackend` is what every backend offers a host, :class:`InProcessBackend`
the one that runs here, one extractor per conversation, positions kept beside the memory.
"""

from memdir.extract._backend import InProcessBackend, MemoryBackend
from memdir.extract._coordinator import Outcome
from memdir.extract._extractor import MemoryExtractor
from memdir.extract._prompts import build_extract_auto_only_prompt, build_extract_combined_prompt
from memdir.extract._standalone import STANDALONE_SYSTEM_PROMPT
from memdir.extract._types import (
    ExtractConfig,
    MemorySaved,
    Notify,
    Position,
    PositionStore,
    TurnContext,
)

__all__ = [
    "STANDALONE_SYSTEM_PROMPT",
    "ExtractConfig",
    "InProcessBackend",
    "MemoryBackend",
    "MemoryExtractor",
    "MemorySaved",
    "Notify",
    "Outcome",
    "Position",
    "PositionStore",
    "TurnContext",
    "build_extract_auto_only_prompt",
    "build_extract_combined_prompt",
]
