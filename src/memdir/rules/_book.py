"""Where rules are kept: ``.memdir/rules.json`` in the memory directory, keyed by memory file.

A rule is born in its memory's frontmatter; this book keeps a copy, so that the rule
survives the memory being rewritten without it (Claude Code's own memory agent, or a
person, may rewrite the whole file and drop a key it does not know). The book follows the
memory files: a file new or changed since the book last saw it is read again, and its rules
replace the ones kept for it when it states any (``rule: none`` states that it has none); a
memory that is gone takes its rules with it, so a memory that ``dream`` merged away or that
the user forgot no longer stops anything. Switching a rule off is kept apart from the
rules, by id, so reading a memory again does not switch it back on.

Each firing is one line in ``.memdir/rule_firings.jsonl``: when, which rule, which memory,
what was stopped or warned about.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdir._private import make_private_dirs, open_private
from memdir.rules._match import Hit
from memdir.rules._rule import Rule, rules_from_frontmatter

__all__ = [
    "FIRINGS_NAME",
    "RULES_NAME",
    "load_rules",
    "read_firings",
    "record_firings",
    "set_enabled",
]

# memdir.store's STATE_DIR_NAME; not imported, so the hook need not load the store (a test
# pins the two together).
_STATE_DIR = ".memdir"
RULES_NAME = f"{_STATE_DIR}/rules.json"
FIRINGS_NAME = f"{_STATE_DIR}/rule_firings.jsonl"
_VERSION = 1


def _memory_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".md") or name == "MEMORY.md":
                continue
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            yield Path(os.path.relpath(path, root)).as_posix(), info


def _read_book(root: Path) -> dict[str, Any]:
    try:
        raw = json.loads((root / RULES_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        return {"version": _VERSION, "memories": {}, "off": []}
    if not isinstance(raw.get("memories"), dict):
        raw["memories"] = {}
    if not isinstance(raw.get("off"), list):
        raw["off"] = []
    return raw


def _write_book(root: Path, book: dict[str, Any]) -> None:
    path = root / RULES_NAME
    make_private_dirs(path.parent)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        json.dump(book, stream, indent=1, ensure_ascii=False)
    # Two hooks may sync at once: each writes a whole book, and the last rename wins.
    os.replace(temporary, path)


def _read_memory(root: Path, name: str) -> list[Rule] | None:
    from memdir.store import parse_memory_file  # only when a memory changed

    try:
        text = (root / name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parsed = parse_memory_file(text)
    return rules_from_frontmatter(parsed.frontmatter, name, parsed.body)


def _sync(root: Path, book: dict[str, Any]) -> bool:
    """Bring the book up to date with the memory files; whether it changed."""
    kept: dict[str, Any] = book["memories"]
    seen: set[str] = set()
    changed = False
    for name, info in _memory_files(root):
        seen.add(name)
        stamp = [info.st_mtime_ns, info.st_size]
        entry = kept.get(name)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            continue
        stated = _read_memory(root, name)
        old_rules = entry.get("rules", []) if isinstance(entry, dict) else []
        rules = [r.as_dict() for r in stated] if stated is not None else old_rules
        kept[name] = {"stamp": stamp, "rules": rules}
        changed = True
    for name in [n for n in kept if n not in seen]:
        del kept[name]
        changed = True
    return changed


def load_rules(memory_root: str | os.PathLike[str], *, sync: bool = True) -> list[Rule]:
    """Every rule of the memory directory, switched-off ones included (``enabled`` False),
    in memory-file order. With ``sync`` (the default) memories changed since the last call
    are read again first, and the book is saved when that changed it."""
    root = Path(memory_root)
    if not root.is_dir():
        return []
    book = _read_book(root)
    if sync and _sync(root, book):
        with contextlib.suppress(OSError):  # a read-only memory folder still enforces
            _write_book(root, book)
    off = {str(i) for i in book["off"]}
    rules: list[Rule] = []
    for entry in book["memories"].values():
        for raw in entry.get("rules", []) if isinstance(entry, dict) else []:
            rule = Rule.from_dict(raw) if isinstance(raw, dict) else None
            if rule is not None:
                rules.append(_with_enabled(rule, rule.id not in off))
    return rules


def _with_enabled(rule: Rule, enabled: bool) -> Rule:
    if rule.enabled == enabled:
        return rule
    return Rule(**{**rule.as_dict(), "enabled": enabled})


def set_enabled(memory_root: str | os.PathLike[str], rule_id: str, enabled: bool) -> Rule:
    """Switch the rule ``rule_id`` (or the one rule whose id starts with it) on or off.
    Raises :class:`LookupError` when no rule, or more than one, has that id."""
    root = Path(memory_root)
    rules = load_rules(root)
    chosen = [r for r in rules if r.id == rule_id] or [r for r in rules if r.id.startswith(rule_id)]
    if len(chosen) != 1:
        what = "no rule" if not chosen else f"{len(chosen)} rules"
        raise LookupError(f"{what} with id {rule_id!r}; `memdir rules` lists them")
    rule = chosen[0]
    book = _read_book(root)
    off = [str(i) for i in book["off"] if i != rule.id]
    if not enabled:
        off.append(rule.id)
    book["off"] = off
    _write_book(root, book)
    return _with_enabled(rule, enabled)


def record_firings(
    memory_root: str | os.PathLike[str],
    hits: list[Hit],
    *,
    tool_name: str,
    session_id: str | None = None,
) -> None:
    """Append one line per rule that fired to ``.memdir/rule_firings.jsonl``."""
    if not hits:
        return
    path = Path(memory_root) / FIRINGS_NAME
    make_private_dirs(path.parent)
    at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    lines = "".join(
        json.dumps(
            {
                "at": at,
                "rule": hit.rule.id,
                "memory": hit.rule.memory,
                "action": hit.rule.action,
                "tool": tool_name,
                "stopped": hit.stopped,
                "session_id": session_id,
            },
            ensure_ascii=False,
        )
        + "\n"
        for hit in hits
    )
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as stream:
        stream.write(lines)


def read_firings(memory_root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every recorded firing, oldest first (lines that do not parse are left out)."""
    try:
        text = (Path(memory_root) / FIRINGS_NAME).read_text(encoding="utf-8")
    except OSError:
        return []
    firings: list[dict[str, Any]] = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                firings.append(entry)
    return firings
