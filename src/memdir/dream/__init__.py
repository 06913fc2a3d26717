"""autoDream: consolidation of the memory directory — merge, correct, prune, re-index."""

from memdir.dream._dream import AutoDream, DreamConfig, sessions_touched_since
from memdir.dream._lock import (
    HOLDER_STALE_SECONDS,
    LOCK_NAME,
    last_consolidated_at,
    record_consolidation,
    release_failed,
    try_acquire,
)
from memdir.dream._prompt import build_consolidation_prompt

__all__ = [
    "HOLDER_STALE_SECONDS",
    "LOCK_NAME",
    "AutoDream",
    "DreamConfig",
    "build_consolidation_prompt",
    "last_consolidated_at",
    "record_consolidation",
    "release_failed",
    "sessions_touched_since",
    "try_acquire",
]
