"""Claude Code session files, written line by line as Claude Code writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def entry(uuid: str, role: str, text: str, *, minute: int = 0, **extra: Any) -> bytes:
    """One transcript line (with its newline): a user or assistant message."""
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    line = {
        "type": role,
        "uuid": uuid,
        "sessionId": "ignored-the-file-name-counts",
        "timestamp": f"2026-03-0{1 + minute // 60}T10:{minute % 60:02d}:00.000Z",
        "message": {"role": role, "content": content},
        **extra,
    }
    return (json.dumps(line) + "\n").encode()


def write_session(folder: Path, session: str, lines: list[bytes]) -> Path:
    path = folder / f"{session}.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)
