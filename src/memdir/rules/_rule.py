"""A rule: the checkable part of a feedback memory, and how one is read from the memory.

A feedback memory that states a rule about actions ("we use pnpm, never npm") carries it in
its frontmatter, written by the memory agent in the same Write as the prose::

    rule: {tool: Bash, match: "npm", action: deny, instead: "pnpm"}

A Bash rule may instead ask for words a command must carry: ``{tool: Bash, match: pytest,
require: "-x"}`` fires on a ``pytest`` run without ``-x`` ("always pass -x to pytest").

``rules:`` with a list of such mappings gives several. ``tool`` names the Claude Code tool:
``Bash`` (``match`` is a command: a program and the first words it must be given), or a tool
that writes files — ``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit``, any of which means
all four — where ``match`` is a path glob relative to the project (``dist/**``, ``*.lock``).
What the model is told when it fires is the memory's own words: the rule's ``reason`` if
it has one, else the memory's description.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["FILE_TOOLS", "Rule", "rules_from_frontmatter"]

FILE_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools that write a file: a path rule for one holds for all of them."""

Action = Literal["deny", "warn"]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One enforceable rule, as stored in ``.memdir/rules.json`` and listed by
    ``memdir rules``."""

    id: str
    """Stable short name (from memory, tool and match), for ``memdir rules off ID``."""
    tool: str
    """``Bash``, or ``Edit`` for any tool that writes a file."""
    match: str
    """For Bash a command (program, then words it must be given); else a path glob."""
    action: Action
    """``deny`` stops the call; ``warn`` lets it run and tells the model why it should not."""
    instead: str | None
    """What to do instead, when the memory says."""
    reason: str
    """The memory's own words, shown to the model when the rule fires."""
    memory: str
    """The memory file the rule comes from, relative to the memory directory."""
    enabled: bool = True
    """False once switched off with ``memdir rules off``."""
    require: str | None = None
    """For a Bash rule, words (options) a matching command must carry: the rule then
    fires on a matching command that lacks one, not on every matching command."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (``memdir rules --json``, ``rules.json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Rule | None:
        """A rule stored earlier, or None when ``raw`` is not one."""
        try:
            action = raw["action"]
            if action not in ("deny", "warn"):
                return None
            instead = raw.get("instead")
            return cls(
                id=str(raw["id"]),
                tool=str(raw["tool"]),
                match=str(raw["match"]),
                action=action,
                instead=str(instead) if instead is not None else None,
                reason=str(raw["reason"]),
                memory=str(raw["memory"]),
                enabled=bool(raw.get("enabled", True)),
                require=str(raw["require"]) if raw.get("require") else None,
            )
        except (KeyError, TypeError):
            return None


def _tool(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = value.strip()
    if name.lower() == "bash":
        return "Bash"
    for tool in FILE_TOOLS:
        if name.lower() == tool.lower():
            return "Edit"
    return None


def _bash_pattern_ok(match: str) -> bool:
    try:
        words = shlex.split(match)
    except ValueError:
        return False
    return bool(words) and not any(c in words[0] for c in "*?[$`")


def _required(raw: object) -> str | None:
    """The words a command must carry, as one shell-quoted string; None when none are
    asked for, "" when what is asked cannot be read."""
    if raw is None:
        return None
    words = [str(w) for w in raw] if isinstance(raw, list) else None
    if words is None:
        try:
            words = shlex.split(str(raw))
        except ValueError:
            return ""
    words = [w.strip() for w in words if w.strip()]
    return shlex.join(words) if words else ""


def _flow(raw: object) -> object:
    """A rule that reached us as text: a frontmatter that is not valid YAML as a whole (a
    description holding ``: ``, which Claude Code reads fine) is read line by line, and a
    ``rule: {…}`` line then arrives as its text. Read that text as YAML on its own."""
    if not isinstance(raw, str) or not raw.lstrip().startswith(("{", "[")):
        return raw
    import yaml  # loaded already: the memory was just parsed

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return None


def rules_from_frontmatter(
    frontmatter: Mapping[str, Any], memory: str, body: str = ""
) -> list[Rule] | None:
    """The rules a memory's frontmatter states; None when it states none (no ``rule`` or
    ``rules`` key), ``[]`` when it says there are none (``rule: none``) or none can be
    checked. Only feedback memories carry rules: anything else is prose."""
    # Claude Code's current layout keeps `type` under `metadata`; a rule may sit there too.
    metadata = frontmatter.get("metadata")
    nested: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    for source in (frontmatter, nested):
        if "rule" in source or "rules" in source:
            raw: object = source["rule"] if "rule" in source else source["rules"]
            break
    else:
        return None
    if frontmatter.get("type", nested.get("type")) != "feedback":
        return []
    raw = _flow(raw)
    entries = raw if isinstance(raw, list) else [raw]
    description = frontmatter.get("description")
    fallback = description if isinstance(description, str) and description.strip() else ""
    if not fallback:
        fallback = next((line.strip() for line in body.splitlines() if line.strip()), memory)
    rules: list[Rule] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        tool = _tool(entry.get("tool"))
        match = entry.get("match")
        if tool is None or not isinstance(match, str) or not match.strip():
            continue
        match = match.strip()
        if tool == "Bash" and not _bash_pattern_ok(match):
            continue
        action = entry.get("action", "deny")
        if action not in ("deny", "warn"):
            continue
        instead = entry.get("instead")
        reason = entry.get("reason")
        require = _required(entry.get("require")) if tool == "Bash" else None
        if require == "":
            continue  # a requirement that cannot be read is no rule
        key = f"{memory}\0{tool}\0{match}" + (f"\0{require}" if require else "")
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        rules.append(
            Rule(
                id=digest,
                tool=tool,
                match=match,
                action=action,
                instead=str(instead).strip() if instead not in (None, "") else None,
                reason=str(reason).strip() if isinstance(reason, str) and reason else fallback,
                memory=memory,
                require=require,
            )
        )
    return rules
