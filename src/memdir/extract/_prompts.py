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

Every run sends it, and what the agent writes is billed at several times the price of what
it reads: so each rule is said once, in as few words as keep it plain, and the agent is
asked for short files, index lines well under Claude Code's ~150 characters, and a small
``Edit`` rather than a whole file written again (``tests/extract/test_prompt_size.py``
holds the budgets).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.errors import UsageError
from memdir.extract._relevance import relevant_files
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
    "changed_section",
    "extract_prompt_parts",
    "has_memory_section",
]

# The index line length asked for: Claude Code asks its own memory agent for under ~150
# characters; a shorter line is cheaper to write and to load into every conversation.
_INDEX_LINE_CHARS = 100

_OPENER = """\
# Memory update

You are now the memory agent for this conversation. Look at the last ~{count} above for \
anything worth remembering in future conversations (a previous run handled earlier ones). \
Often nothing is."""

_SHORT_OPENER = """\
# Memory update

Look at the last ~{count} above."""

_ABSOLUTE = ". Use absolute paths."
_RELATIVE = " (relative paths start {home})."

# memdir's own request says, once in its cached system prompt, what each run's request
# says in words of its own in a fork's single prompt: the request after the conversation
# then holds only what changes from run to run.
_EACH_REQUEST = """\
## Each request

After the conversation, memdir's request says how many of the last messages are new \
(earlier runs had the rest; often nothing is worth keeping) and what memory holds. Update \
a listed file rather than duplicate it; fix or remove one shown wrong. A large store lists \
only the files the new messages touch: `Grep` the memory directory before writing one \
that may exist."""

_TOOLS = """\
## Tools

`Read`, `Grep`, `Glob`: any path. `Bash`: read-only (no redirection, no `rm`). `Write`, \
`Edit`: only inside {where}{paths}"""

# memdir's own request offers these four alone.
_OWN_TOOLS = """\
## Tools

`Read`, `Grep`: any path. `Write`, `Edit`: only inside {where}{paths}"""

_TURNS = """\
## Turns

Nothing worth saving (the usual case): {nothing} Otherwise at most two turns, the \
calls of each in parallel: first every `Read` you need, then every `Write` and `Edit`. \
`Edit`, or `Write` over a file, needs a `Read` of it in this run{known}, so new files \
alone take one turn. Change a file with a small `Edit`, not a whole new `Write`.{ends}

Use the conversation alone: no investigating the codebase, project files or git, no \
checking facts."""

_MANIFEST = """\
## Existing memory files

{manifest}

Update a listed file rather than duplicate it; fix or remove one the conversation shows \
is wrong."""

_CHANGED = """\
## Memory files changed since the list above

{lines}

Each line here replaces the list's line for its file."""

_REMOVED = "- removed: {filename}"

_TOO_MANY = """\
## What the memory directory holds

{count} memory files{more}: {kinds}. Too many to list; those the new messages touch are \
listed with this request. Before writing one that may exist, `Grep` or `Glob` the memory \
directory (frontmatter holds each file's `name` and `description`)."""

_TOUCHED = _MANIFEST.replace("{manifest}", "{listed}")

_SHORT_MANIFEST = """\
## Existing memory files

{manifest}"""

# Right after the list of those the new messages touch, which it counts.
_SHORT_TOO_MANY = "{count} memory files in all{more}: {kinds}."

_NONE_TOUCHED = "The new messages touch none of the memory files by name or description."

_ELIDED_LEAD = (
    "{label} counts as `Read`. Shown here without its {count} pointer {lines} to memory "
    "files (`Read` it to change one); its last line is exact: add a pointer by an `Edit` "
    "of that line, never a `Write` of the whole index."
)

_ELISION = "[… {count} pointer {lines} to memory files …]"

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
## Direct requests

- "Remember": save it now, as the type that fits best.
- "Forget": `Edit` it out of its memory (no `rm`; a file left with nothing is rewritten \
empty){unindex}."""

_TYPES_INTRO = """\
## Types

One per memory. Save only what a later conversation could not learn from the project."""

_TYPE_USER = """\
- **user**: their role, goals, expertise and gaps, how they like to work and be answered. \
Facts, not judgements; no personal details the work does not need."""

_TYPE_FEEDBACK = """\
- **feedback**: how they want the work done: corrections, and confirmed non-obvious \
choices (saving only mistakes breeds needless caution). Body: the rule, then a \
`**Why:**` line and a `**How to apply:**` line.
  If it rules a checkable act (commands, files not to edit), add a frontmatter \
`rule:` mapping: `tool` (Bash, or Edit for files), `match` (program and first words, \
like `npm`, or a file glob like `dist/**`), `action` (deny; warn for a preference), \
`instead` (`pnpm`) or, for a flag it must have, `require` (`-x`)."""

_TYPE_PROJECT = """\
- **project**: what code and git do not record: efforts, decisions and why, deadlines, \
incidents; who does what, by when. Absolute dates (YYYY-MM-DD, from today's date). Body: \
the fact, then `**Why:**` and `**How to apply:**` lines. Update or remove it when things \
move on."""

_TYPE_REFERENCE = """\
- **reference**: where something lives outside the project (dashboard, issue tracker, \
chat channel, document): the link or exact name, and when to look there."""

_SCOPES = """\
Scope: user, private; feedback, private unless clearly a team convention (how the \
project is tested or released), and never contradicting team feedback (leave it out, or \
say that this person overrides the team rule); project, team unless it concerns this \
person alone; reference, usually team."""

_TEAM_SECRETS = """\
**Never** put a secret (API key, token, password, any credential) in team memory: \
everyone on the project reads it."""

_NOT_TO_SAVE = """\
## Never save, even when asked

- What the code or git shows: patterns, architecture, paths, structure, history, fixes.
- What CLAUDE.md, AGENTS.md or other instruction files say.
- The task in hand: progress, temporary notes, this conversation's context.
- Secrets: API keys, tokens, passwords, credentials.
- Details about other people the work does not need.

Asked for one (say, this week's merges), keep only what was surprising in it, if any."""

_FILE_FORMAT = """\
## How to save

One fact per file (two facts, two files), {where}, named in short snake_case{named}:

```markdown
---
{frontmatter}
---

<body>
```

Be terse: a body of a few lines. Link related memories as `[[name]]`, even unwritten \
ones. {keep}"""

_DESCRIPTION_LINE = "description: <one specific line; later runs judge relevance by it>"
# The frontmatter each layout of memdir.store's MemoryFormat asks for: today's Claude Code
# keeps `type` under `metadata` with a kebab-case `name`; 2.1.88 kept both at the top.
_FRONTMATTER: Mapping[MemoryFormat, str] = {
    "current": (
        f"name: <short-name-in-kebab-case>\n{_DESCRIPTION_LINE}\n"
        "metadata:\n  type: <user|feedback|project|reference>"
    ),
    "2.1.88": f"name: <short title>\n{_DESCRIPTION_LINE}\ntype: <user|feedback|project|reference>",
}

_FILE_NAMED = " (`user_role.md`)"
_KEEP = "On a change, keep `name`, `description` and `type` true to the body."
# memdir's own tools store a memory file in Claude Code's layout (the type under
# `metadata`, a slug `name`) and take the name and the type from the file's name when
# the frontmatter has none: the agent writes the one line only it can, and no output
# goes on the rest.
_OWN_NAMED = ", type first (`feedback_testing.md`)"
_OWN_FRONTMATTER = _DESCRIPTION_LINE
_OWN_KEEP = (
    "memdir takes `name` and `type` from the file name. On a change, keep the `description` "
    "true to the body."
)

_INDEX = """\
Index: add a pointer line to {index}, under ~{line_chars} characters: \
`- [Title](file.md) — hook`. {indexes} is only an index (no frontmatter, no content), by \
topic, not date, loaded into every conversation and cut at {max_lines} lines."""

_NO_INDEX = "No index here: do not create, read or change `MEMORY.md`."

_MEMDIR_INDEX = """\
Index: memdir writes each memory's pointer line in {index} itself, from its `name` and \
`description` (under ~{line_chars} characters), and drops it when the file is emptied: \
leave {indexes} alone."""

_SHORT_MEMDIR_INDEX = """\
- memdir writes each memory's `MEMORY.md` line itself, from its `name` and `description`, \
whatever the system prompt says: leave `MEMORY.md` alone."""

_SHORT = """\
## How this run works

Your system prompt's memory section rules the types, what not to save, and how memory \
files{entries} look; this adds how this run goes.{named}

- One fact per file (two facts, two files); link related memories as `[[name]]`.
- `Read`, `Grep`, `Glob` anywhere; `Bash` read-only (no `rm`: `Edit` a memory away to \
forget it); `Write` and `Edit` only inside {where}{relative}, and on an existing file \
only after a `Read` of it in this run{known}.
- First every `Read` at once, then every `Write` and `Edit` at once; no back and forth. \
Change a file with a small `Edit`, not a whole new `Write`.
- Be terse: a few lines a file{short_index}.
- Use the conversation alone: no searching the codebase, no git, no checking facts."""

_SHORT_TEAM_SECRETS = """\
- **Never** put a secret (API key, token, password, any credential) in team memory: \
everyone on the project reads it."""

_NOTHING = "Nothing to save."

_SHORT_FINISH = f"""\
If nothing is worth saving, call no tool and answer only `{_NOTHING}`; otherwise end \
with one line on what you saved or changed."""

_FINISH = f"""\
## Finish

End without a tool call: one line on what you saved or changed, or only `{_NOTHING}`"""

# memdir's tools end a run after a turn whose writes all succeed: a closing line would
# cost a request, and words beside the calls are output spent for no reader.
_OWN_WRITES_END = "Writes that succeed end the run: no words beside them."

_SHORT_OWN_FINISH = f"Nothing worth saving: answer only `{_NOTHING}` {_OWN_WRITES_END}"

# A memory section in a host's system prompt: a "# Memory" heading (Claude Code 2.1.332,
# memdir's recall prompt) or "# auto memory" (Claude Code's older builds), and, soon
# after it, the sentence that says the agent has a persistent memory.
_MEMORY_HEADING = re.compile(r"^# (?:Memory|auto memory)[ \t]*$", re.M)
_PERSISTENT = re.compile(r"persistent,? (?:file-based )?memory", re.I)
_SECTION_LEAD_CHARS = 1_000


@dataclass(frozen=True, kw_only=True)
class PromptParts:
    """The extraction prompt in parts, by how often each one changes.

    A fork sends them as one message (:attr:`whole`). memdir's own standalone request
    puts :attr:`instructions` in its system prompt, cached across runs; the
    :attr:`listing` before the conversation, cached, with later changes to it sent
    after the conversation; and :attr:`request` and :attr:`state` last.
    """

    request: str
    """What this run is about: the number of new messages, where memory lives, the
    turn's date and, in a store too large to list, the memory files the new messages
    touch (sent last, so it never changes a cached prefix)."""
    state: str
    """What memory holds now, but for :attr:`listing`: the text of each index and, in a
    store too large to list, the count of memory files by type."""
    instructions: str
    """How to do the job; the same on every run of one extractor."""
    listing: str = ""
    """The list of memory files, in a store small enough to list them all ("" past
    that)."""

    @property
    def memory(self) -> str:
        """All that the prompt shows of memory: :attr:`listing`, then :attr:`state`."""
        return _join(self.listing, self.state)

    @property
    def whole(self) -> str:
        """All as one prompt: the request, what memory holds, then the instructions."""
        return _join(self.request, self.listing, self.state, self.instructions)


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
    memdir_indexes: bool = False,
    user_dir: str | None = None,
    user_listing: str = "",
    own_tools: bool = False,
    standalone: bool = False,
) -> PromptParts:
    """The extraction prompt for one private directory, or (``team``) a private and a team
    directory, in parts; the other arguments are those of
    :func:`build_extract_auto_only_prompt` and :func:`build_extract_combined_prompt`.

    ``memdir_indexes``: memdir's own file tools keep each memory's ``MEMORY.md`` line
    (:attr:`memdir.tools.MemoryFiles.index`), so the agent is told to leave the index
    alone and is not shown it; without it (a fork whose writes bypass memdir's tools)
    the agent keeps the index itself, from its text shown here.

    ``memories``, when given, are the store's files in the order to list them, and take
    the place of ``manifest``: each memory is then shown once, in the list, and the index
    texts leave out their pointer lines to memory files. Past ``list_budget`` files, the
    state only counts them by type, and the request lists the (at most ``list_budget``)
    files most relevant to ``new_text``, the new messages: what a run is shown stays the
    same size however many memories the store holds, and the state before the
    conversation does not change with the new messages.

    ``user_dir``: the user layer, where memories clearly about the person go (the request
    says which and that nothing else does); ``user_listing`` its memory files as
    :func:`~memdir.store.format_manifest` lists them, so a memory there is updated rather
    than written again.

    ``own_tools``: memdir's own file tools, bound to the (private) memory directory, run
    the agent's calls: a relative path starts from that directory, and in the current
    layout they name the memory after its file and store its frontmatter as Claude Code
    does, so the prompt asks only for ``description`` and ``type``. Without it (the real
    Claude Code CLI runs the calls) the prompt asks for absolute paths and every field.

    ``standalone``: the parts of memdir's own request, whose :attr:`PromptParts.instructions`
    go in its cached system prompt: they then also say what every request holds and how
    to use it, and name the directories, so that the request and the state, sent
    uncached after the conversation on every run, hold only what changes.
    """
    if memory_format not in MEMORY_FORMATS:
        raise UsageError(
            f"unknown memory format {memory_format!r}; expected one of {MEMORY_FORMATS}"
        )
    opener = _opener(new_message_count, short=standalone)
    if team:
        if team_dir is None and memory_dir is not None:
            team_dir = os.path.join(memory_dir, "team")
        location = _combined_location(memory_dir, team_dir)
    else:
        location = f"The memory directory is `{memory_dir}`." if memory_dir is not None else ""
    request = opener if standalone or not location else f"{opener}\n\n{location}"
    if user_dir is not None:
        request += "\n\n" + _user_layer_location(user_dir, user_listing)
    if today is not None:
        # Claude Code's own words for the date in its context; the memory agent needs it
        # to turn "next Thursday" into a calendar date.
        request += f"\n\nToday's date is {today.isoformat()}."
    state: list[str] = []
    listing = ""
    if memories is None:
        listing = _manifest_section(manifest, short=standalone)
    elif list_budget is None or len(memories) <= list_budget:
        listing = _manifest_section(format_manifest(memories, day_only=True), short=standalone)
    else:
        # Past the budget the list depends on the new messages, so it goes last, with the
        # request.
        state = [_too_many_section(memories, short=standalone)]
        request += "\n\n" + _touched_section(memories, new_text, list_budget, short=standalone)
    # With the list given, it carries every memory, and the index drops its pointer lines.
    elide = memories is not None
    if not skip_index and not memdir_indexes:
        if team:
            private = "`MEMORY.md` of the private directory"
            state.append(_index_section(private, index_text, elide))
            shared = "`MEMORY.md` of the team directory"
            state.append(_index_section(shared, team_index_text, elide))
        else:
            state.append(_index_section("`MEMORY.md`", index_text, elide))
    home = "in the private one" if team else "there"
    paths = _RELATIVE.format(home=home) if own_tools else _ABSOLUTE
    instructions = (
        _short_instructions(
            team,
            skip_index,
            named=memory_dir is not None,
            memdir=memdir_indexes,
            relative=paths[:-1] if own_tools else "",
        )
        if host_memory
        else _instructions(
            team,
            skip_index,
            memory_format,
            memdir=memdir_indexes,
            paths=paths,
            own_tools=own_tools,
            standalone=standalone,
        )
    )
    if standalone:
        instructions = _join(instructions, _EACH_REQUEST, location)
    return PromptParts(
        request=request, state=_join(*state), instructions=instructions, listing=listing
    )


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
_KNOWN = " (a shown index counts as read)"


def _short_instructions(
    team: bool, skip_index: bool, named: bool, memdir: bool = False, relative: str = ""
) -> str:
    where = "the two memory directories" if team else "the memory directory"
    # With memdir keeping the index, the agent neither sees nor writes it.
    own_index = not skip_index and not memdir
    known = _KNOWN if own_index else ""
    named_line = _NAMED if named else ""
    short_index = f", index lines under ~{_INDEX_LINE_CHARS} characters" if own_index else ""
    entries = "" if memdir else " and index entries"
    sections = [
        _SHORT.format(
            where=where,
            known=known,
            named=named_line,
            short_index=short_index,
            entries=entries,
            relative=relative,
        )
    ]
    if team:
        sections[0] += "\n" + _SHORT_TEAM_SECRETS
    if memdir and not skip_index:
        # The host's own memory section (Claude Code's) says to add the line by hand.
        sections[0] += "\n" + _SHORT_MEMDIR_INDEX
    if skip_index:
        sections.append(_NO_INDEX)
    sections.append(_SHORT_OWN_FINISH if relative else _SHORT_FINISH)
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
        lead = f"{label} holds exactly this (it counts as `Read`: `Edit` it directly):"
    # A fence longer than any backtick run inside keeps the text whole.
    fence = "```"
    while fence in text:
        fence += "`"
    body = text.rstrip("\n") or "(empty)"
    return _INDEX_TEXT.format(label=label, lead=lead, text=body, fence=fence)


def _instructions(
    team: bool,
    skip_index: bool,
    memory_format: MemoryFormat,
    memdir: bool = False,
    paths: str = _ABSOLUTE,
    own_tools: bool = False,
    standalone: bool = False,
) -> str:
    types = [_TYPE_USER, _TYPE_FEEDBACK, _TYPE_PROJECT, _TYPE_REFERENCE]
    if team:
        where = "the two memory directories"
        index = "the `MEMORY.md` of its directory"
        indexes = "Each directory's `MEMORY.md`"
        unindex = ", and its pointer out of that directory's `MEMORY.md`"
        types += ["", f"{_SCOPES}\n\n{_TEAM_SECRETS}"]
        saved_in = "in the directory its scope calls for"
    else:
        where = "the memory directory"
        index = "`MEMORY.md`"
        indexes = "`MEMORY.md`"
        unindex = ", and its pointer out of `MEMORY.md`"
        saved_in = "in the memory directory"
    # The short frontmatter only where memdir stamps the layout (the current one).
    stamped = own_tools and memory_format == "current"
    how = _FILE_FORMAT.format(
        where=saved_in,
        named=_OWN_NAMED if stamped else _FILE_NAMED,
        frontmatter=_OWN_FRONTMATTER if stamped else _FRONTMATTER[memory_format],
        keep=_OWN_KEEP if stamped else _KEEP,
    )
    if skip_index:
        unindex = ""
        how += "\n\n" + _NO_INDEX
    elif memdir:
        unindex = ""
        # Mid-sentence here: "each directory's", not the sentence-initial "Each".
        leave = indexes[:1].lower() + indexes[1:]
        how += "\n\n" + _MEMDIR_INDEX.format(
            index=index, line_chars=_INDEX_LINE_CHARS, indexes=leave
        )
    else:
        how += "\n\n" + _INDEX.format(
            index=index,
            line_chars=_INDEX_LINE_CHARS,
            indexes=indexes,
            max_lines=MAX_ENTRYPOINT_LINES,
        )
    return _join(
        (_OWN_TOOLS if standalone else _TOOLS).format(where=where, paths=paths),
        _TURNS.format(
            known="" if skip_index or memdir else _KNOWN,
            nothing=f"answer only `{_NOTHING}`" if own_tools else "no tool call.",
            ends=f" {_OWN_WRITES_END}" if own_tools else "",
        ),
        _REQUESTS.format(unindex=unindex),
        _TYPES_INTRO + "\n\n" + "\n".join(types),
        _NOT_TO_SAVE,
        how,
        # memdir's tools end a run on its writes: no closing line is asked for.
        "" if own_tools else _FINISH,
    )


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


def _opener(new_message_count: int, short: bool = False) -> str:
    if new_message_count < 0:
        raise UsageError(f"new_message_count must not be negative, got {new_message_count}")
    noun = "message" if new_message_count == 1 else "messages"
    return (_SHORT_OPENER if short else _OPENER).format(count=f"{new_message_count} {noun}")


def _user_layer_location(user_dir: str, listing: str) -> str:
    # The scope rule in words the agent can apply to one memory at a time.
    held = (
        f"\n\nWhat the user layer holds now:\n{listing}"
        if listing
        else "\n\nThe user layer holds no memory yet."
    )
    return (
        f"User layer: `{user_dir}`, with its own `MEMORY.md`; every project this person "
        "works in loads it. A memory clearly about the person and true wherever they "
        "work goes there: their role, expertise and preferences (`user` memories), and "
        "`feedback` on how they want work done in general. Anything about this project "
        "(its code, its people, its deadlines, its conventions) stays in the project's "
        "memory directory. Never put a secret in the user layer."
    ) + held


def _combined_location(memory_dir: str | None, team_dir: str | None) -> str:
    private = f": `{memory_dir}`" if memory_dir is not None else ""
    # Without either path, still say where the team directory sits by default.
    team = f": `{team_dir}`" if team_dir is not None else " (`team` inside the private one)"
    return (
        "There are two memory directories:\n\n"
        f"- Private, for this user alone{private}.\n"
        f"- Team, shared with everyone who works on this project{team}."
    )


def _manifest_section(manifest: str, short: bool = False) -> str:
    if not manifest.strip():
        return ""
    return (_SHORT_MANIFEST if short else _MANIFEST).format(manifest=manifest.rstrip("\n"))


# 200: the most files MemoryDir.scan lists by default (Claude Code's MAX_MEMORY_FILES).
_SCAN_CAP = 200
# A line of an index that points to a memory file in its directory: `- [Title](file.md)
# — hook`. Not a link to a web page or to an absolute path.
_POINTER = re.compile(r"\]\(\s*<?(?!/|[a-z][a-z0-9+.-]*:)[^)\s>]*\.md>?\s*\)", re.I)


def _too_many_section(memories: Sequence[MemoryHeader], short: bool = False) -> str:
    """What a store too large to list holds, counted by type (``short``: without what
    to do about it, which memdir's own request says in its system prompt)."""
    kinds = [(kind, sum(1 for h in memories if h.type == kind)) for kind in MEMORY_TYPES]
    untyped = sum(1 for h in memories if h.type is None)
    counts = [f"{n} {kind}" for kind, n in kinds if n] + ([f"{untyped} untyped"] if untyped else [])
    # A scan lists the newest files only: at its cap there are more than it shows.
    more = " or more (the newest are counted)" if len(memories) >= _SCAN_CAP else ""
    template = _SHORT_TOO_MANY if short else _TOO_MANY
    return template.format(count=len(memories), more=more, kinds=", ".join(counts))


def _touched_section(
    memories: Sequence[MemoryHeader], new_text: str, limit: int, short: bool = False
) -> str:
    """The (at most ``limit``) memory files the new messages touch, in the caller's order."""
    chosen = relevant_files(memories, new_text, max(limit, 0))
    listed = format_manifest(
        [header for header in memories if header.filename in chosen], day_only=True
    )
    if short:
        return _SHORT_MANIFEST.format(manifest=listed.rstrip("\n") or _NONE_TOUCHED)
    return _TOUCHED.format(listed=listed or _NONE_TOUCHED)


def changed_section(changed: Sequence[MemoryHeader], removed: Sequence[str]) -> str:
    """What changed in the memory directory since a list of its files was shown: a line
    for each memory written since (new or changed), one for each file gone."""
    lines = [format_manifest(changed, day_only=True)] if changed else []
    lines += [_REMOVED.format(filename=name) for name in removed]
    return _CHANGED.format(lines="\n".join(lines)) if lines else ""


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
