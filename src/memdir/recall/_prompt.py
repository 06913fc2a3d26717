"""What the main agent is told about memory: a system-prompt section and the index reminder.

Two channels, as in Claude Code. The system-prompt section holds instructions only — where
memory lives, what is worth keeping, how to save it, when to look and how far to trust it —
and depends on nothing but its arguments, so a host can put it in a cached prefix. The index
itself (``MEMORY.md``) changes from one conversation to the next, so it travels separately
in a ``<system-reminder>`` that the host puts in a user message at the start of a
conversation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeAlias

from memdir.errors import UsageError
from memdir.messages import Message
from memdir.store import (
    ENTRYPOINT_NAME,
    MAX_ENTRYPOINT_LINES,
    MEMORY_FORMATS,
    TEAM_DIR_NAME,
    MemoryDir,
    MemoryFormat,
    strip_entrypoint_noise,
    truncate_entrypoint,
)

__all__ = [
    "MemoryDirLike",
    "as_memory_dir",
    "memory_prompt",
    "memory_reminder",
    "memory_reminder_message",
]

MemoryDirLike: TypeAlias = MemoryDir | str | os.PathLike[str]
"""A memory directory, or a path to one."""

# ~150 characters: the index line length Claude Code asks for.
_INDEX_LINE_CHARS = 150


def as_memory_dir(memory_dir: MemoryDirLike) -> MemoryDir:
    """``memory_dir`` as a :class:`~memdir.store.MemoryDir`."""
    return memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)


def memory_prompt(
    memory_dir: MemoryDirLike,
    team: bool = False,
    skip_index: bool = False,
    *,
    format: MemoryFormat = "current",
    user_dir: MemoryDirLike | None = None,
) -> str:
    """The memory section for the main agent's system prompt.

    It says where memory lives (with ``team``: the private directory and the shared
    ``team/`` folder), the four memory types and when each is worth saving, how to save
    one (with ``skip_index``: a file only, no ``MEMORY.md`` pointer; the frontmatter in
    the layout ``format`` names, with ``[[name]]`` links between memories in the current
    one), what never to save, when to look, and why a memory must be checked before it
    is acted on. With ``user_dir`` (the user layer, see
    :func:`memdir.store.user_memory_dir`) it also names the folder of memories about the
    person that every project loads, says which memories go there, and that the project's
    memory wins where the two disagree.

    The text holds no date, count or anything else read from the disk: the same arguments
    always give the same string, so the section can sit in a cached prompt prefix. It
    holds instructions only; the index is sent by :func:`memory_reminder`.
    """
    if format not in MEMORY_FORMATS:
        raise UsageError(f"unknown memory format {format!r}; expected one of {MEMORY_FORMATS}")
    md = as_memory_dir(memory_dir)
    where = _where(md, team)
    if user_dir is not None:
        where += "\n\n" + _user_layer_text(as_memory_dir(user_dir))
    sections = [
        where,
        _types(team),
        _how_to_save(team, skip_index, format),
        _what_not_to_save(team),
        _WHEN_TO_LOOK,
        _BEFORE_RECOMMENDING,
        _OTHER_STATE,
    ]
    return "\n\n".join(sections)


def _dir_text(path: Path) -> str:
    # A trailing separator, as Claude Code writes it, marks the path as a folder.
    return f"{path}{os.sep}"


def _where(md: MemoryDir, team: bool) -> str:
    intro = (
        "# Memory\n\n"
        "You have a persistent memory made of Markdown files. What you save there is still "
        "there in later conversations with this user, so use it to build up what you know "
        "about who the user is, how they like the work done, and what is happening around "
        "the project."
    )
    create = (
        "If a memory directory does not exist yet, create it when you save the first "
        "memory; write files directly with your file tools."
    )
    if not team:
        return f"{intro}\n\nThe memory directory is `{_dir_text(md.root)}`.\n\n{create}"
    return (
        f"{intro}\n\n"
        "## Where memory lives\n\n"
        f"- Private memory: `{_dir_text(md.root)}`. Only you and this user see it.\n"
        f"- Team memory: `{_dir_text(md.team_dir)}` (the `{TEAM_DIR_NAME}/` folder). It is "
        "shared with everyone who collaborates on this project: their agents read it and "
        "add to it, so anything saved there reaches other people.\n\n"
        f"{create}"
    )


def _user_layer_text(user: MemoryDir) -> str:
    return (
        "## Memory about the user, across projects\n\n"
        f"User memory: `{_dir_text(user.root)}`, with its own `{ENTRYPOINT_NAME}`. It is "
        "loaded in every project this user works in. Save there what is about the person "
        "and true wherever they work: their role and expertise (`user` memories) and how "
        "they want work done in general (`feedback` that is not about this project). "
        "Everything about this project stays in the project's memory. Where a project "
        "memory and a user memory disagree, follow the project memory: it is the more "
        "specific."
    )


def _types(team: bool) -> str:
    def scope(text: str) -> str:
        return f" {text}" if team else ""

    return (
        "## Kinds of memory\n\n"
        "Save only what cannot be worked out again from the project as it is. Every "
        "memory has one of four types:\n\n"
        "- **user**: who the user is — role, goals, responsibilities, expertise, "
        "preferences. Worth saving when it should change how you explain things or what "
        "you propose (say, an experienced backend engineer who is new to the frontend). "
        "Leave out judgements about the person and private details that do not bear on "
        "the work." + scope("Always private.") + "\n"
        '- **feedback**: how the user wants the work done. Save corrections ("not like '
        'that", "stop doing X") and also quiet approval of a non-obvious choice, so you '
        "neither repeat mistakes nor become timid. Write the rule, then a **Why:** line "
        "and a **How to apply:** line."
        + scope(
            "Private unless it is plainly a rule for the whole project, such as a testing "
            "policy; private feedback must not contradict team feedback."
        )
        + "\n"
        "- **project**: ongoing work, goals, incidents, bugs and deadlines that the code "
        "and its history do not show — who is doing what, why, and by when. Turn "
        "relative dates into absolute ones. Write the fact, then **Why:** and **How to "
        "apply:** lines. These go out of date quickly."
        + scope("Prefer team memory for these.")
        + "\n"
        "- **reference**: where to find things that live outside the project: an issue "
        "tracker, a dashboard, a chat channel, a runbook." + scope("Usually team memory.")
    )


def _frontmatter_example(format: MemoryFormat) -> str:
    description = (
        "description: <one line, specific enough to tell later whether the memory is relevant>\n"
    )
    if format == "2.1.88":
        return (
            "```\n---\nname: <short name>\n"
            f"{description}"
            "type: <user | feedback | project | reference>\n---\n<the memory itself>\n```"
        )
    return (
        "```\n---\nname: <short-name-in-kebab-case>\n"
        f"{description}"
        "metadata:\n  type: <user | feedback | project | reference>\n---\n\n"
        "<the memory itself; link related memories with [[their-name]]>\n```"
    )


def _how_to_save(team: bool, skip_index: bool, format: MemoryFormat) -> str:
    where = "the directory that fits its scope" if team else "the memory directory"
    file_step = (
        f"Write each memory to its own Markdown file in {where} (for example "
        "`user_role.md` or `feedback_testing.md`), starting with this frontmatter:\n\n"
        f"{_frontmatter_example(format)}"
    )
    rules = (
        "- Group memories by topic, not by date.\n"
        "- Before writing, look for a memory on the same subject and update it instead of "
        "adding a duplicate.\n"
        "- Fix or delete memories that turn out wrong or outdated, and keep `name`, "
        "`description` and `type` in line with the content."
    )
    if format == "current":
        rules += (
            "\n- In a memory's text, refer to another memory as `[[name]]`, with the other "
            "memory's `name`. Link freely: a link to a memory that does not exist yet is "
            "not an error, it marks something worth writing down later."
        )
    if skip_index:
        return f"## How to save a memory\n\n{file_step}\n\n{rules}"
    index_where = "each directory's own" if team else "the"
    index_step = (
        f"Then add a one-line pointer to {index_where} `{ENTRYPOINT_NAME}`, under about "
        f"{_INDEX_LINE_CHARS} characters: `- [Title](file.md) — what it is about`. "
        f"`{ENTRYPOINT_NAME}` is an index and nothing else: no frontmatter, no memory "
        "content. It is loaded into every conversation and cut off after "
        f"{MAX_ENTRYPOINT_LINES} lines, so keep it short."
    )
    if team:
        index_step += " Both indexes are loaded."
    return f"## How to save a memory\n\n1. {file_step}\n\n2. {index_step}\n\n{rules}"


def _what_not_to_save(team: bool) -> str:
    secrets = "- Secrets: API keys, passwords, tokens, credentials of any kind"
    secrets += " — and never anything sensitive in team memory.\n" if team else ".\n"
    return (
        "## What not to save\n\n"
        "- Code patterns, conventions, architecture, file paths or project layout: the "
        "code shows them.\n"
        "- Git history, or who changed what: `git log` and `git blame` know it.\n"
        "- Debugging fixes and recipes: the fix lives in the code, the story in the "
        "commit message.\n"
        "- Anything the project's instruction files (CLAUDE.md, AGENTS.md and the like) "
        "already say.\n"
        "- The state of the current task, or other details that only matter in this "
        "conversation.\n"
        f"{secrets}\n"
        "This holds even when the user asks you to save such a thing. Ask what was "
        "surprising or non-obvious about it, and keep only that."
    )


_WHEN_TO_LOOK = f"""\
## When to use memory

- Look at your memories when they seem relevant to the task, or when the user refers to \
earlier conversations or earlier work.
- When the user asks you to check, recall or remember something, you MUST look.
- If the user says to ignore memory or not to use it, behave as if {ENTRYPOINT_NAME} were \
empty: do not cite memories, do not compare with them, do not mention them.
- Memories go stale. When one disagrees with what you see now, trust what you see, and \
update or delete the memory."""

_BEFORE_RECOMMENDING = """\
## Before recommending from memory

A memory that names a file, a function or a flag is a claim about the moment it was \
written; it may have been renamed, moved or removed since. Before you recommend anything \
based on it, or before the user acts on it:

- a file path: check that the file exists;
- a function, class or flag: grep for it.

For questions about how things are now or what changed recently, prefer the current \
state — `git log`, the code itself — over a memory's snapshot."""

_OTHER_STATE = """\
## Memory and other ways to keep state

Memory is for what a future conversation needs. Progress on the task at hand belongs in \
your plan or task list, not in memory."""


def memory_reminder(
    memory_dir: MemoryDirLike, team: bool = False, *, user_dir: MemoryDirLike | None = None
) -> str:
    """The ``MEMORY.md`` index, ready for a reminder at the start of a conversation.

    The index is read, stripped of frontmatter and HTML comments, and capped by
    :func:`~memdir.store.truncate_entrypoint` (whose warning line stays in when a cap
    fired). The result is one ``<system-reminder>`` block naming the file and saying it is
    the user's memory index, kept across conversations. With ``team`` the team index
    follows inside ``<team-memory-content source="shared">``. When there is nothing to
    load the block says that memory is currently empty.

    The host sends this text as a user message (see :func:`memory_reminder_message`), not
    in the system prompt: it changes whenever a memory is saved, and the system prompt
    should not.

    With ``user_dir`` (the user layer) its index comes first, said to give way to the
    project's memory where they disagree: the project's index, read after it, is the one
    that stands, as in Claude Code, where the user's ``CLAUDE.md`` (which imports the
    layer) precedes the project's memory.
    """
    md = as_memory_dir(memory_dir)
    project = _project_reminder(md, team)
    if user_dir is None:
        return _wrap(project)
    user = as_memory_dir(user_dir)
    layer = _load_index(user.entrypoint)
    if not layer:
        return _wrap(project)
    return _wrap(
        f"Contents of {user.entrypoint} (the user layer: memories about the user, loaded in "
        "every project; where the project's memory below says otherwise, the project's "
        f"memory wins):\n\n{layer}\n\n{project}"
    )


def _project_reminder(md: MemoryDir, team: bool) -> str:
    private = _load_index(md.entrypoint)
    shared = _load_index(md.team_entrypoint) if team else ""
    if not private and not shared:
        where = f"{_dir_text(md.root)}" + (" (private and team)" if team else "")
        return f"The user's memory at {where} is currently empty: nothing has been saved yet."

    parts = []
    if private:
        parts.append(
            f"Contents of {md.entrypoint} (the user's memory index, kept across "
            f"conversations):\n\n{private}"
        )
    else:
        parts.append(f"The user's private memory index {md.entrypoint} is currently empty.")
    if shared:
        parts.append(
            f"Contents of {md.team_entrypoint} (the team's shared memory index, kept across "
            f'conversations):\n\n<team-memory-content source="shared">\n{shared}\n'
            "</team-memory-content>"
        )
    elif team:
        parts.append(f"The team memory index {md.team_entrypoint} is currently empty.")
    return "\n\n".join(parts)


def memory_reminder_message(
    memory_dir: MemoryDirLike, team: bool = False, *, user_dir: MemoryDirLike | None = None
) -> Message:
    """:func:`memory_reminder` as a user message marked ``is_meta`` (written by the harness).

    Put it before the first real user message of a conversation.
    """
    return Message.user(memory_reminder(memory_dir, team=team, user_dir=user_dir), is_meta=True)


def _load_index(path: Path) -> str:
    """The index at ``path`` as it is loaded: cleaned, capped; ``""`` when missing or blank."""
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        # Missing, a directory, unreadable: memory is a hint, so an index that cannot be
        # read is treated as one that holds nothing.
        return ""
    cleaned = strip_entrypoint_noise(raw)
    if not cleaned.strip():
        return ""
    return truncate_entrypoint(cleaned, path).content


def _wrap(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"
