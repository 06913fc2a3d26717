"""Feedback memories with rules, written the way the memory agent writes them."""

from __future__ import annotations

from pathlib import Path

PNPM = """\
---
name: pnpm, never npm
description: We use pnpm in this repo, never npm: npm writes a package-lock.json.
type: feedback
rule: {tool: Bash, match: "npm", action: deny, instead: "pnpm install"}
---
We use pnpm, never npm.
**Why:** npm writes package-lock.json.
**How to apply:** run pnpm for every install.
"""


def write_memory(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_text(text, encoding="utf-8")
    return path


def feedback(rule: str, description: str = "A rule the user gave.") -> str:
    """A feedback memory whose frontmatter holds ``rule`` (a YAML value)."""
    return (
        f"---\nname: rule\ndescription: {description}\ntype: feedback\nrule: {rule}\n---\n"
        f"{description}\n"
    )
