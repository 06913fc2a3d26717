"""The extraction prompt: the one user message that turns a fork into the memory agent.

The fork already holds the whole conversation, so the prompt only says what to do with
its newest part: which tools it may use and how to spend its few turns, what kinds of
memory exist, what never to save, and the file format and index rules of the store.

Two variants: *auto-only* (one private directory) and *combined* (a private and a team
directory, with guidance on which scope each memory belongs to). Either may drop the
``MEMORY.md`` step (``skip_index``) for setups that find memories without the index.

Each comes whole or short. The whole prompt says everything, for a fork whose host knows
nothing of memory and for memdir's own standalone request. The short one is for a fork
whose host's system prompt already holds a memory section (Claude Code's "# Memory", or
memdir's own :func:`memdir.recall.memory_prompt`): the memory agent then follows that
section for the types, what not to save and the file format, as Claude Code's own fork
does, and the prompt adds only how this run works, so the two never disagree.

The text depends on nothing but the arguments, so identical inputs give a byte-identical
prompt and repeated runs keep a stable, cacheable prefix.
"""

from __future__ import annotations

import datetime
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.errors import UsageError
from memdir.store import (
    MAX_ENTRYPOINT_LINES,
    MEMORY_FORMATS,
    MEMORY_TYPES,
    MemoryFormat,
    MemoryHeader,
    format_manifest,
)

__all__ = [
    "PromptParts",
    "build_extract_auto_only_prompt",
    "build_extract_combined_prompt",
    "extract_prompt_parts",
    "has_memory_section",
]

# ~150 characters: the index line length Claude Code asks its memory agent to stay under.
_INDEX_LINE_CHARS = 150

_OPENER = """\
# Memory update

You are now the memory agent for this conversation. Look at the last ~{count} above and \
decide whether anything there is worth remembering in future conversations; earlier \
messages were already handled by a previous run. Often nothing is."""

_TOOLS = """\
## Tools

- `Read`, `Grep` and `Glob` may be used on any path.
- `Bash` is for read-only commands only: no output redirection, no `rm`, nothing that \
creates, moves or changes a file.
- `Write` and `Edit` only work on files inside {where}.
- Any other tool call is refused.

Always use absolute paths."""

_TURNS = """\
## One turn, or two

Every request costs, so spend as few as the work allows:

- Nothing worth saving, which is the usual case: answer in one short line and call no \
tool at all.
- Only new memories: in a single turn, `Write` each new file{index_step}, all as parallel \
calls. Once every call of a turn has written successfully, the run is over.
- A change to a memory that exists: `Edit`, and `Write` over a file that already exists, \
only work on a file you have `Read` earlier in this run{known}. So first issue every \
`Read` you need at once, as parallel calls; then, in the next turn, every `Write` and \
`Edit` at once.

Do not alternate read, write, read over several turns.

Work from the conversation alone. Do not investigate or verify anything: no grepping the \
codebase, no reading project files, no git commands, no checking whether what was said is \
true. Your tools are for the memory files, not for research."""

_MANIFEST = """\
## Existing memory files

These memory files exist already:

{manifest}

Check this list before you write: update an existing file instead of writing a duplicate, \
and change or remove a memory the conversation shows is wrong."""

_TOO_MANY = """\
## What the memory directory holds

{count} memory files{more}: {kinds}. Too many to list on every run: the ones the new messages \
touch are listed with the request, after the conversation. Before you write a memory \
that may exist already, `Grep` or `Glob` the memory directory for it (each file's `name` \
and `description` are in its frontmatter)."""

_TOUCHED = """\
## Existing memory files

{listed}

Check this list before you write: update an existing file instead of writing a duplicate, \
and change or remove a memory the conversation shows is wrong."""

_NONE_TOUCHED = "The new messages touch none of the memory files by name or description."

_ELIDED_LEAD = (
    "{label} counts as `Read` already. Shown here without its {count} pointer {lines} to "
    "memory files (`- [Title](file.md) — hook`; `Read` it before you change or remove "
    "one). Its last line is exact: add a pointer with an `Edit` of that line, and never "
    "`Write` over the whole index."
)

_ELISION = "[… {count} pointer {lines} to memory files …]"

_ADD_POINTER = ", and add its pointer to {index} (`Edit` it, or `Write` it if it does not exist)"

_INDEX_TEXT = """\
## {label} as it is now

{lead}

{fence}markdown
{text}
{fence}"""

_NO_INDEX_YET = """\
## {label} as it is now

{label} does not exist yet: create it with `Write`."""

_REQUESTS = """\
## When the user asks directly

- Asked to remember something: save it in this run, as the type that fits it best.
- Asked to forget something: find the memory that holds it and take it out. There is no \
`rm`, so `Edit` the passage away, or rewrite the whole file without it (with nothing left, \
rewrite it empty){unindex}."""

_TYPES_INTRO = """\
## The four types of memory

Save only what a future conversation could not learn from the project as it stands. Every \
memory has exactly one type."""

_TYPE_USER = """\
### user

Who the person is: their role, goals and responsibilities, what they know well and where \
they are new, how they like to work and to be answered. The point is that later answers \
fit them, for instance by explaining an unfamiliar tool in terms of one they already know. \
Record facts, not judgements about the person, and leave out personal details that have \
no bearing on the work."""

_TYPE_FEEDBACK = """\
### feedback

How they want the work done. Save corrections (they told you to stop doing something, or \
to do it differently) and also confirmations: they approved an approach that was not the \
obvious one, or accepted an unusual choice without objection. If only mistakes get \
recorded, you drift towards needless caution.

Body: the rule itself, then a `**Why:**` line (the reason they gave, or that the situation \
made plain) and a `**How to apply:**` line (when and where the rule holds)."""

_TYPE_PROJECT = """\
### project

What is happening around the work that neither the code nor the git history records: \
ongoing efforts, goals, decisions and the reasons for them, deadlines, incidents. Capture \
who is doing what, why, and by when. Never leave a date relative: "next Thursday" \
becomes a calendar date (YYYY-MM-DD), worked out from today's date.

Body: the fact or decision, then a `**Why:**` line and a `**How to apply:**` line. These \
memories go stale fast; update or remove them when the conversation shows that things \
have moved on."""

_TYPE_REFERENCE = """\
### reference

Where things live outside the project: a dashboard, an issue tracker or board, a chat \
channel, a design document or runbook. Give the link (or the exact name) and say when it \
is worth looking there."""

_SCOPES = (
    "Scope: always private.",
    "Scope: private, unless it is clearly a convention for the whole team (how the project "
    "is tested or released, say). Private feedback must not contradict team feedback: if it "
    "would, leave it out, or state in the memory that this person overrides the team rule.",
    "Scope: lean towards team; keep it private only when it concerns this person alone.",
    "Scope: usually team.",
)

_TEAM_SECRETS = """\
### Secrets

**Never** put a secret (an API key, token, password or any other credential) in team \
memory: everyone on the project reads it. Keep secrets out of private memory too."""

_NOT_TO_SAVE = """\
## What not to save

Leave these out, even when the user asks you to save them:

- Code patterns, conventions, architecture, file paths and project structure: the code \
itself shows them.
- Git history: what changed, when, and who changed it. Git already has it.
- Debugging recipes and fixes: the fix lives in the code, its story in the commit message.
- Anything the project's instruction files (CLAUDE.md, AGENTS.md and the like) already say.
- The state of the task in hand: work in progress, temporary notes, context that only \
matters in this conversation.
- Secrets of any kind: API keys, tokens, passwords, credentials.
- Information about other people that the work does not need.

If the user asks you to save something of this kind (say, a summary of what was merged \
this week), do not store it as it is: keep only what was surprising or non-obvious about \
it, if anything."""

_FILE_FORMAT = """\
## How to save

Each memory holds one fact (one preference, one decision, one link to elsewhere) in a \
Markdown file of its own {where}: two facts make two files. Give the file a short, \
descriptive snake_case name such as `user_role.md` or `feedback_testing.md`. The file \
starts with frontmatter in exactly this form:

```markdown
---
{frontmatter}
---

<body>
```

{links}When you change a memory, keep its `name`, `description` and `type` true to the new \
body."""

_DESCRIPTION_LINE = (
    "description: <one line: what this memory is; later runs use it to decide relevance, "
    "so be specific>"
)
# The frontmatter each layout of memdir.store's MemoryFormat asks for: today's Claude Code
# keeps `type` under `metadata` with a kebab-case `name`; 2.1.88 kept both at the top.
_FRONTMATTER: Mapping[MemoryFormat, str] = {
    "current": (
        f"name: <short-name-in-kebab-case>\n{_DESCRIPTION_LINE}\n"
        "metadata:\n  type: <user|feedback|project|reference>"
    ),
    "2.1.88": f"name: <short title>\n{_DESCRIPTION_LINE}\ntype: <user|feedback|project|reference>",
}

_LINKS = """\
In the body, link each related memory as `[[name]]`, with that memory's `name`. Link \
freely: a link to a memory nobody has written yet is no error, it marks something worth \
saving later.

"""

_INDEX = """\
Then add a pointer to the file in {index}: one line, under ~{line_chars} characters, in \
the form `- [Title](file.md) — one-line hook`.

`MEMORY.md` is only an index: it has no frontmatter and never holds the content of a \
memory. {loaded} and cut off after {max_lines} lines, so keep {each} short and organised \
by topic, not by date. A missing index is created with `Write`."""

_NO_INDEX = """\
Write the memory file and nothing more: memories are found without an index here, so do \
not create, read or change `MEMORY.md`."""

_SHORT = """\
## How this run works

Your system prompt already has a section on memory. Follow it for the types of memory, \
for what is not worth saving, and for how a memory file and its index entry look; this \
message adds only how this run goes.{named}

- One fact per file: two facts make two files. Link related memories with `[[name]]`, \
the other memory's `name`.
- Check the list of existing files before you write: update the file that already holds \
a fact rather than adding a duplicate, and correct a memory the conversation shows is \
wrong.
- `Read`, `Grep` and `Glob` work anywhere; `Bash` only for read-only commands (no `rm`: \
to forget a memory, `Edit` it away); `Write` and `Edit` only inside {where}. `Edit`, or \
`Write` over an existing file, needs a `Read` of it earlier in this run{known}.
- Spend as few turns as you can: first every `Read` you need, all at once; then every \
`Write` and `Edit`, all at once. Do not go back and forth.
- Use the conversation alone: no searching the codebase, no git, no checking facts."""

_SHORT_TEAM_SECRETS = """\
- **Never** put a secret (an API key, token, password or other credential) in team \
memory: everyone on the project reads it."""

_NOTHING = "Nothing to save."

_SHORT_FINISH = f"""\
If nothing is worth saving, call no tool and answer only `{_NOTHING}`; otherwise end \
with one line on what you saved or changed."""

_FINISH = f"""\
## Finish

When you answer without a tool call, say in one line what you saved or changed (for \
example `Saved feedback_testing.md; updated user_role.md.`), or answer only \
`{_NOTHING}`"""

# A memory section in a host's system prompt: a "# Memory" heading (Claude Code 2.1.332,
# memdir's recall prompt) or "# auto memory" (Claude Code's older builds), and, soon
# after it, the sentence that says the agent has a persistent memory.
_MEMORY_HEADING = re.compile(r"^# (?:Memory|auto memory)[ \t]*$", re.M)
_PERSISTENT = re.compile(r"persistent,? (?:file-based )?memory", re.I)
_SECTION_LEAD_CHARS = 1_000


@dataclass(frozen=True, kw_only=True)
class PromptParts:
    """The extraction prompt in three parts, by how often each one changes.

    A fork sends them as one message (:attr:`whole`). memdir's own standalone request
    puts :attr:`instructions` in its system prompt, cached across runs; :attr:`state`
    before the conversation, cached until a memory changes; and :attr:`request` last.
    """

    request: str
    """What this run is about: the number of new messages, where memory lives, the
    turn's date and, in a store too large to list, the memory files the new messages
    touch (sent last, so it never changes a cached prefix)."""
    state: str
    """What memory holds now: the list of memory files (or, in a store too large to
    list, their count by type) and the text of each index (and, in memdir's own request,
    the project's instruction files after them)."""
    instructions: str
    """How to do the job; the same on every run of one extractor."""

    @property
    def whole(self) -> str:
        """The three as one prompt: the request, the state, then the instructions."""
        return _join(self.request, self.state, self.instructions)


def extract_prompt_parts(
    new_message_count: int,
    manifest: str,
    skip_index: bool = False,
    *,
    memory_dir: str | None = None,
    team: bool = False,
    team_dir: str | None = None,
    index_text: str | None = None,
    team_index_text: str | None = None,
    today: datetime.date | None = None,
    memory_format: MemoryFormat = "current",
    host_memory: bool = False,
    memories: Sequence[MemoryHeader] | None = None,
    new_text: str = "",
    list_budget: int | None = None,
) -> PromptParts:
    """The extraction prompt for one private directory, or (``team``) a private and a team
    directory, in parts; the other arguments are those of
    :func:`build_extract_auto_only_prompt` and :func:`build_extract_combined_prompt`.

    ``memories``, when given, are the store's files in the order to list them, and take
    the place of ``manifest``: each memory is then shown once, in the list, and the index
    texts leave out their pointer lines to memory files. Past ``list_budget`` files, the
    state only counts them by type, and the request lists the (at most ``list_budget``)
    files most relevant to ``new_text``, the new messages: what a run is shown stays the
    same size however many memories the store holds, and the state before the
    conversation does not change with the new messages.
    """
    if memory_format not in MEMORY_FORMATS:
        raise UsageError(
            f"unknown memory format {memory_format!r}; expected one of {MEMORY_FORMATS}"
        )
    opener = _opener(new_message_count)
    if team:
        if team_dir is None and memory_dir is not None:
            team_dir = os.path.join(memory_dir, "team")
        request = opener + "\n\n" + _combined_location(memory_dir, team_dir)
    else:
        request = opener
        if memory_dir is not None:
            request += f"\n\nThe memory directory is `{memory_dir}`."
    if today is not None:
        # Claude Code's own words for the date in its context; the memory agent needs it
        # to turn "next Thursday" into a calendar date.
        request += f"\n\nToday's date is {today.isoformat()}."
    if memories is None:
        state = [_manifest_section(manifest)]
    elif list_budget is None or len(memories) <= list_budget:
        state = [_manifest_section(format_manifest(memories))]
    else:
        # Past the budget the list depends on the new messages, so it goes last, with the
        # request: the state before the conversation stays the same from run to run.
        state = [_too_many_section(memories)]
        request += "\n\n" + _touched_section(memories, new_text, list_budget)
    # With the list given, it carries every memory, and the index drops its pointer lines.
    elide = memories is not None
    if not skip_index:
        if team:
            private = "`MEMORY.md` of the private directory"
            state.append(_index_section(private, index_text, elide))
            shared = "`MEMORY.md` of the team directory"
            state.append(_index_section(shared, team_index_text, elide))
        else:
            state.append(_index_section("`MEMORY.md`", index_text, elide))
    instructions = (
        _short_instructions(team, skip_index, named=memory_dir is not None)
        if host_memory
        else _instructions(team, skip_index, memory_format)
    )
    return PromptParts(request=request, state=_join(*state), instructions=instructions)


def has_memory_section(system: str | Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether a host's system prompt (a string or a list of text blocks) has a section
    that tells its agent about its persistent memory: Claude Code's "# Memory" (or the
    older "# auto memory"), or the one :func:`memdir.recall.memory_prompt` writes."""
    if system is None:
        return False
    texts = [system] if isinstance(system, str) else [str(b.get("text", "")) for b in system]
    for text in texts:
        for heading in _MEMORY_HEADING.finditer(text):
            lead = text[heading.end() : heading.end() + _SECTION_LEAD_CHARS]
            if _PERSISTENT.search(lead):
                return True
    return False


_NAMED = " Save in the directory named above, even where the system prompt names another."


def _short_instructions(team: bool, skip_index: bool, named: bool) -> str:
    where = "the two memory directories" if team else "the memory directory"
    known = "" if skip_index else " (an index whose text you are shown counts as read)"
    sections = [_SHORT.format(where=where, known=known, named=_NAMED if named else "")]
    if team:
        sections[0] += "\n" + _SHORT_TEAM_SECRETS
    if skip_index:
        sections.append(_NO_INDEX)
    sections.append(_SHORT_FINISH)
    return _join(*sections)


def _index_section(label: str, text: str | None, elide: bool = False) -> str:
    if text is None:
        return _NO_INDEX_YET.format(label=label)
    shown, elided = _without_pointers(text) if elide else (text, 0)
    if elided:
        lines = "line" if elided == 1 else "lines"
        lead = _ELIDED_LEAD.format(label=label, count=elided, lines=lines)
        text = shown
    else:
        lead = f"{label} holds exactly this; it counts as `Read` already, so `Edit` it directly:"
    # A fence longer than any backtick run inside keeps the text whole.
    fence = "```"
    while fence in text:
        fence += "`"
    body = text.rstrip("\n") or "(empty)"
    return _INDEX_TEXT.format(label=label, lead=lead, text=body, fence=fence)


def _file_format(where: str, memory_format: MemoryFormat) -> str:
    return _FILE_FORMAT.format(where=where, frontmatter=_FRONTMATTER[memory_format], links=_LINKS)


def _instructions(team: bool, skip_index: bool, memory_format: MemoryFormat) -> str:
    if team:
        where_tools = "the two memory directories"
        index_step = (
            "" if skip_index else _ADD_POINTER.format(index="the `MEMORY.md` of its directory")
        )
        unindex = "" if skip_index else ", and remove its line from that directory's `MEMORY.md`"
        index = _NO_INDEX
        if not skip_index:
            index = _INDEX.format(
                index="the `MEMORY.md` of the same directory (each directory has its own)",
                line_chars=_INDEX_LINE_CHARS,
                loaded="Both indexes are loaded into every conversation",
                each="each one",
                max_lines=MAX_ENTRYPOINT_LINES,
            )
        types = (_TYPE_USER, _TYPE_FEEDBACK, _TYPE_PROJECT, _TYPE_REFERENCE)
        typed = [f"{text}\n\n{scope}" for text, scope in zip(types, _SCOPES, strict=True)]
        return _join(
            _TOOLS.format(where=where_tools),
            _turns(index_step, skip_index),
            _REQUESTS.format(unindex=unindex),
            _TYPES_INTRO,
            *typed,
            _TEAM_SECRETS,
            _NOT_TO_SAVE,
            _file_format("in the directory its scope calls for", memory_format),
            index,
            _FINISH,
        )
    index_step = "" if skip_index else _ADD_POINTER.format(index="`MEMORY.md`")
    unindex = "" if skip_index else ", and remove its line from `MEMORY.md`"
    index = _NO_INDEX
    if not skip_index:
        index = _INDEX.format(
            index="`MEMORY.md` in the same directory",
            line_chars=_INDEX_LINE_CHARS,
            loaded="It is loaded into every conversation",
            each="it",
            max_lines=MAX_ENTRYPOINT_LINES,
        )
    return _join(
        _TOOLS.format(where="the memory directory"),
        _turns(index_step, skip_index),
        _REQUESTS.format(unindex=unindex),
        _TYPES_INTRO,
        _TYPE_USER,
        _TYPE_FEEDBACK,
        _TYPE_PROJECT,
        _TYPE_REFERENCE,
        _NOT_TO_SAVE,
        _file_format("in the memory directory", memory_format),
        index,
        _FINISH,
    )


def _turns(index_step: str, skip_index: bool) -> str:
    known = "" if skip_index else " (an index whose text you are shown counts as read)"
    return _TURNS.format(index_step=index_step, known=known)


def build_extract_auto_only_prompt(
    new_message_count: int,
    manifest: str,
    skip_index: bool = False,
    *,
    memory_dir: str | None = None,
    index_text: str | None = None,
    today: datetime.date | None = None,
    memory_format: MemoryFormat = "current",
    host_memory: bool = False,
) -> str:
    """The extraction prompt for a single, private memory directory.

    ``new_message_count`` is the "~N" most recent messages the agent should look at;
    ``manifest`` lists the existing memory files (see :func:`memdir.store.format_manifest`)
    and is left out, heading and all, when it is empty. ``skip_index`` drops every
    ``MEMORY.md`` step and tells the agent to leave that file alone. ``memory_dir``, when
    given, is named as the directory to write in. ``index_text`` is the text of
    ``MEMORY.md`` (None: it does not exist); the prompt shows it, so the agent can change
    the index without a ``Read`` first, and the caller must count it as read.

    ``today`` is the date of the turn, given to the agent for dates such as "next
    Thursday". ``memory_format`` is the frontmatter layout the prompt asks for (see
    :data:`memdir.store.MemoryFormat`). ``host_memory`` gives the short prompt, for a fork
    whose host's system prompt has a memory section already (see
    :func:`has_memory_section`): it defers to that section for the types, what not to
    save and the file format.

    Raises :class:`~memdir.errors.UsageError` for a negative ``new_message_count`` or an
    unknown ``memory_format``.
    """
    return extract_prompt_parts(
        new_message_count,
        manifest,
        skip_index,
        memory_dir=memory_dir,
        index_text=index_text,
        today=today,
        memory_format=memory_format,
        host_memory=host_memory,
    ).whole


def build_extract_combined_prompt(
    new_message_count: int,
    manifest: str,
    skip_index: bool = False,
    *,
    memory_dir: str | None = None,
    team_dir: str | None = None,
    index_text: str | None = None,
    team_index_text: str | None = None,
    today: datetime.date | None = None,
    memory_format: MemoryFormat = "current",
    host_memory: bool = False,
) -> str:
    """The extraction prompt for a private directory with a shared team directory beside it.

    Arguments as for :func:`build_extract_auto_only_prompt`. ``memory_dir`` is the private
    directory; ``team_dir`` the team one, by default ``team`` inside ``memory_dir``;
    ``team_index_text`` the team directory's ``MEMORY.md``. The prompt adds, for each type
    of memory, whether it belongs in private or team memory, and forbids secrets in team
    memory. Each directory keeps its own ``MEMORY.md``.

    Raises :class:`~memdir.errors.UsageError` for a negative ``new_message_count`` or an
    unknown ``memory_format``.
    """
    return extract_prompt_parts(
        new_message_count,
        manifest,
        skip_index,
        memory_dir=memory_dir,
        team=True,
        team_dir=team_dir,
        index_text=index_text,
        team_index_text=team_index_text,
        today=today,
        memory_format=memory_format,
        host_memory=host_memory,
    ).whole


def _opener(new_message_count: int) -> str:
    if new_message_count < 0:
        raise UsageError(f"new_message_count must not be negative, got {new_message_count}")
    noun = "message" if new_message_count == 1 else "messages"
    return _OPENER.format(count=f"{new_message_count} {noun}")


def _combined_location(memory_dir: str | None, team_dir: str | None) -> str:
    private = f": `{memory_dir}`" if memory_dir is not None else ""
    # Without either path, still say where the team directory sits by default.
    team = f": `{team_dir}`" if team_dir is not None else " (`team` inside the private one)"
    return (
        "There are two memory directories:\n\n"
        f"- Private, for this user alone{private}.\n"
        f"- Team, shared with everyone who works on this project{team}."
    )


def _manifest_section(manifest: str) -> str:
    if not manifest.strip():
        return ""
    return _MANIFEST.format(manifest=manifest.rstrip("\n"))


_RELEVANCE_CHARS = 40_000
# 200: the most files MemoryDir.scan lists by default (Claude Code's MAX_MEMORY_FILES).
_SCAN_CAP = 200
# A line of an index that points to a memory file in its directory: `- [Title](file.md)
# — hook`. Not a link to a web page or to an absolute path.
_POINTER = re.compile(r"\]\(\s*<?(?!/|[a-z][a-z0-9+.-]*:)[^)\s>]*\.md>?\s*\)", re.I)
# Words too common to tell one memory from another.
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "from",
        "have",
        "has",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "should",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "all",
        "any",
        "its",
        "into",
        "out",
        "use",
        "used",
        "about",
        "they",
        "them",
        "then",
        "than",
        "there",
        "here",
        "just",
        "also",
        "only",
        "more",
        "most",
        "some",
        "such",
        "very",
        "one",
        "two",
    ]
)
# BM25's usual constants: term-frequency saturation and document-length normalisation.
_K1 = 1.2
_B = 0.75


def _too_many_section(memories: Sequence[MemoryHeader]) -> str:
    """What a store too large to list holds, counted by type."""
    kinds = [(kind, sum(1 for h in memories if h.type == kind)) for kind in MEMORY_TYPES]
    untyped = sum(1 for h in memories if h.type is None)
    counts = [f"{n} {kind}" for kind, n in kinds if n] + ([f"{untyped} untyped"] if untyped else [])
    # A scan lists the newest files only: at its cap there are more than it shows.
    more = " or more (the newest are counted)" if len(memories) >= _SCAN_CAP else ""
    return _TOO_MANY.format(count=len(memories), more=more, kinds=", ".join(counts))


def _touched_section(memories: Sequence[MemoryHeader], new_text: str, limit: int) -> str:
    """The (at most ``limit``) memory files the new messages touch, in the caller's order."""
    chosen = _relevant(memories, new_text, max(limit, 0))
    listed = format_manifest([header for header in memories if header.filename in chosen])
    return _TOUCHED.format(listed=listed or _NONE_TOUCHED)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP_WORDS]


def _relevant(memories: Sequence[MemoryHeader], new_text: str, limit: int) -> frozenset[str]:
    """The file names of at most ``limit`` memories the new messages touch: those they
    name first, then the best by BM25 over each file's name, file name and description.

    Lexical and read from the headers alone, so it costs no request and no file read;
    the memory agent finds anything it misses with `Grep`.
    """
    # The newest part of a long backlog is enough to tell what it touches, and keeps this
    # work (it runs on the host's event loop) small whatever the backlog's length.
    new_text = new_text[-_RELEVANCE_CHARS:]
    lowered = new_text.lower()
    named = [h.filename for h in memories if h.filename.lower() in lowered]
    terms = set(_words(new_text))
    documents = [
        Counter(_words(" ".join((h.filename, h.name or "", h.description or "")))) for h in memories
    ]
    lengths = [sum(doc.values()) for doc in documents]
    average = sum(lengths) / len(lengths) or 1.0
    holders = Counter(term for doc in documents for term in doc if term in terms)
    count = len(documents)
    scored: list[tuple[float, int]] = []
    for index, (doc, length) in enumerate(zip(documents, lengths, strict=True)):
        score = 0.0
        for term in terms & doc.keys():
            idf = math.log(1 + (count - holders[term] + 0.5) / (holders[term] + 0.5))
            norm = _K1 * (1 - _B + _B * length / average)
            score += idf * doc[term] * (_K1 + 1) / (doc[term] + norm)
        if score > 0:
            scored.append((score, index))
    # Highest score first; a tie keeps the caller's order.
    scored.sort(key=lambda item: (-item[0], item[1]))
    ranked = [*named, *(memories[index].filename for _, index in scored)]
    return frozenset(list(dict.fromkeys(ranked))[:limit])


def _without_pointers(text: str) -> tuple[str, int]:
    """``text`` with each run of lines that point to a memory file replaced by their
    count (the list carries the memories; the index's pointers would repeat it, and grow
    with the store), and how many went. The last line stays, exact, for an `Edit` to add
    a pointer after."""
    lines = text.rstrip("\n").split("\n")
    kept: list[str] = []
    run = 0
    elided = 0
    for number, line in enumerate(lines):
        if _POINTER.search(line) is not None and number < len(lines) - 1:
            run += 1
            continue
        if run:
            kept.append(_ELISION.format(count=run, lines="line" if run == 1 else "lines"))
            elided += run
            run = 0
        kept.append(line)
    return "\n".join(kept), elided


def _join(*sections: str) -> str:
    return "\n\n".join(section for section in sections if section)
