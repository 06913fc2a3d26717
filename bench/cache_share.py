"""What the memory agent costs beside a tool-heavy coding agent, under the real cache rules.

A coding agent (a system prompt of about 3,500 tokens, memdir's six tools plus two of its
own) holds a ``--turns``-turn session through ``AnthropicModel`` against
``FakeAnthropicServer``, which caches by Anthropic's rules on a clock the run moves: a
20-block look-back, the model's minimum prefix, entries that expire after 5 idle minutes,
earlier thinking blocks dropped by the models that drop them. Every turn makes two to five
rounds of tool calls (file reads of 60 to 110 lines, test runs) before its answer, and the
turns are half a minute to twenty minutes apart (a fixed, seeded schedule; one in five over
five minutes). After every turn ``MemoryExtractor.on_turn_end`` gets the host's request and
is drained. The memory model saves a memory on one turn in four (a Write and the index
Edit, one request) and answers "Nothing new to save." on the others.

The host stays inside the model's context window (the fake refuses a longer prompt, as
the API does) the way Claude Code does: before a request whose context (the last
response's usage plus an estimate of the messages since) would reach Claude Code's
auto-compact point, ``window - min(max output, 20,000) - 13,000`` (167,000 of 200,000),
it sends one summarising request on its own prefix (billed to the host), then goes on
from the summary (``is_compact_summary``) and its latest whole turns (up to 20,000
tokens, the turn under way always). The report gives the compactions, the host's peak
prompt against the window, and where each memory side's bill goes (by mode, cold or
warm, around compactions) beside the planner's estimates.

Side by side, each in a run of its own with the same host and replies:

- ``host``: the coding agent's own requests (what memory is measured against);
- ``memdir_auto``: the extractor as shipped, the planner choosing per run;
- ``memdir_fork`` and ``memdir_standalone``: the two ways forced;
- ``fresh_agent``: the best a user could do without memdir's planner and window: a
  memory agent of its own, sent the whole conversation as messages after a fixed system
  prompt and tools, with breakpoints where its previous run ended and where this one
  ends, so every run reads the last one's cache.

Three variants: claude-sonnet-4-5 without thinking; the same with thinking (which that
model drops from earlier turns); claude-opus-4-5 with thinking (kept). Usage is the
server's own report of each request, split by memdir's prompt; the memory sides are
checked against the ``extract.run`` telemetry. Cost is in billed-token equivalents of the
input price: cache read 0.1, cache write 1.25 (1 h: 2), input 1, output 5.

    python bench/cache_share.py [--turns 40] [--variants sonnet-4-5,...] [--context N]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _scripted import feedback_saves, is_memory_request, parse_memory_request, save_calls
from memdir.cost import bill, model_family
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._prompts import extract_prompt_parts
from memdir.extract._standalone import render, standalone_system_prompt
from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy, Usage
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.store import MemoryDir, format_manifest
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock, RecordedRequest
from memdir.tools import FileStamp, ToolContext, builtin_tools

SEED = 20261203
MODES = ("auto", "fork", "standalone")
VARIANTS = {
    "sonnet-4-5": ("claude-sonnet-4-5", False),
    "sonnet-4-5-thinking": ("claude-sonnet-4-5", True),
    "opus-4-5-thinking": ("claude-opus-4-5", True),
}
THINKING = {"type": "enabled", "budget_tokens": 2048}
USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
)

# --- the host -----------------------------------------------------------------------------

_GUIDANCE = """\
You are a coding agent working in the user's repository through a terminal. You read \
code, run commands, edit files and explain what you did. You act on the user's behalf, \
so be careful with anything that cannot be undone and ask before you delete files, \
rewrite history or push to a shared branch.

## How to work

Start by understanding the request. If it is ambiguous, ask one short question rather \
than guessing; if it is clear, get on with it. Read the code you are about to change and \
the code that calls it before changing anything. Prefer the smallest change that solves \
the problem completely, and keep to the style of the surrounding code: its naming, its \
error handling, its tests. Do not reformat lines you did not need to touch.

When a change is done, run the checks the project uses (its test command, its linter, \
its type checker) and read their output. If something fails, find out why before trying \
again; do not retry the same command hoping for a different result. Report what you \
changed, what you ran and what you could not verify.

## Tools

Use Read to look at files and Grep or Glob to find them; do not use Bash for what those \
tools do. Use Edit for small changes and Write only for new files or complete rewrites. \
Bash runs in the repository root; each call starts a fresh shell, so pass absolute paths \
or chain commands with &&. Long-running commands need a timeout. Use run_tests to run \
the test suite or a part of it, and search_docs for the project's documentation.

Several independent tool calls can go in one message; they run in parallel. Calls that \
depend on each other go in separate messages, one after the other.

## Answers

Answer in the language the user writes in. Be brief: a few sentences, or a short list, \
unless the user asks for detail. Quote code only when it helps, and then only the lines \
that matter, with the file path and line numbers. Never claim to have run something you \
did not run. When you are unsure, say so and say what would settle it.

## Safety

Never print, log or commit a secret: API keys, tokens, passwords, private keys. If you \
find one in the repository, tell the user where it is and do not copy it anywhere. Do \
not install packages, change global configuration or reach external services without \
the user's approval.

## Git

Look at `git status` and `git diff` before you commit, and commit only what belongs to \
the task. Write commit messages in the imperative, with a subject under seventy \
characters and a body that says why the change was made. Never amend or rebase commits \
that are already on a shared branch, never force-push, and never skip hooks. When a hook \
fails, fix what it reports and make a new commit. Create a branch for work that will go \
through review; name it after the task, not after yourself.

## Tests

A bug fix comes with a test that fails before the fix and passes after it. A new \
feature comes with tests for its ordinary use and for its edges: empty input, the \
largest input the code claims to handle, invalid input, a failing dependency. Keep tests \
fast and independent of each other and of the order they run in; no sleeping to wait for \
background work, no reaching the network. When a test is flaky, find the cause; do not \
add retries. Run the narrowest set of tests while iterating and the full suite before \
you say the work is finished.

## Reading unfamiliar code

Start from the entry point the user mentioned, or from the failing test, and follow the \
calls. Read the module docstrings and the tests of the code you are reading: they often \
say what the code is for more clearly than the code does. Note the invariants the code \
relies on before you change anything that might break them. When two parts of the code \
disagree, say so rather than silently choosing one.

## Performance

Measure before you optimise, and measure again after. Report numbers with their units \
and the conditions they were taken under: the input size, the machine, cold or warm. \
Prefer an algorithmic fix over a micro-optimisation, and a micro-optimisation that keeps \
the code readable over one that does not. Do not trade correctness for speed without \
saying so.

## Dependencies

Use what the project already depends on before adding anything. If a new dependency is \
really needed, name it, say why, say what it costs (size, licence, maintenance) and wait \
for the user to agree. Pin versions the way the project already does.

## Reviews

When asked to review a change, read all of it before commenting. Separate what must \
change (bugs, security problems, broken contracts) from what could be better (naming, \
structure) and from matters of taste, and say which is which. Suggest concrete fixes. \
Acknowledge what is good about the change as well; reviews that only list faults are \
harder to act on.

## Working with the user

The user knows things about the project that the code does not show: deadlines, the \
people involved, why an odd choice was made. Take their corrections at face value and \
adjust; if they confirm an approach, keep using it. If you disagree with an instruction, \
say why once, then follow it unless it is unsafe. Keep them informed during long tasks \
with a line or two at each milestone, not a running commentary.
"""

_AREAS = (
    "the ingest pipeline",
    "the billing service",
    "the web frontend",
    "the command line client",
    "the report generator",
    "the scheduler",
    "the search index",
    "the authentication layer",
)
_RULES = (
    "has its own test folder and fixtures; run only that folder while iterating",
    "logs through the shared structured logger, never print()",
    "keeps its configuration in a typed settings object read once at start-up",
    "raises errors from the project's exception hierarchy, never bare Exception",
    "has integration tests that need the local database container to be running",
    "is owned by a different team; changes need a review from one of its maintainers",
)


def system_prompt() -> str:
    """A coding agent's system prompt of a few thousand tokens: guidance, then project notes."""
    notes = [f"- {area.capitalize()} {rule}." for area in _AREAS for rule in _RULES]
    layout = [
        f"### {area.capitalize()}\n\n"
        f"Code in src/acme/{area.split()[-1]}/, tests in tests/{area.split()[-1]}/, "
        f"documentation in docs/{area.split()[-1]}.md. Run its tests alone with "
        f"`make test AREA={area.split()[-1]}`; they take about {20 + 7 * i} seconds. "
        f"Its public interface is what src/acme/{area.split()[-1]}/__init__.py exports; "
        "anything else may change without notice, and other areas must not import it. "
        "Database migrations for it live beside the code and run in order of their "
        "numbers; never edit a migration that has been released, add a new one."
        for i, area in enumerate(_AREAS)
    ]
    environment = "\n".join(
        [
            "## Environment",
            "",
            "Working directory: /home/dev/acme (a git repository, branch main).",
            "Platform: linux. Shell: bash. Python 3.11 in .venv; Node 20 for the frontend.",
            "Test command: make test. Lint: make lint. Type check: make typecheck.",
        ]
    )
    return "\n\n".join(
        [
            _GUIDANCE,
            "## Project layout\n\n" + "\n\n".join(layout),
            "## Project notes\n\n" + "\n".join(notes),
            environment,
        ]
    )


SYSTEM = system_prompt()

HOST_TOOLS = [
    {
        "name": "run_tests",
        "description": "Run the project's test suite, or the tests matching a path or "
        "keyword, and return the summary and any failures.",
        "input_schema": {
            "type": "object",
            "properties": {
                "target": {"type": "string", "description": "A test path or -k expression."},
                "verbose": {"type": "boolean"},
            },
        },
    },
    {
        "name": "search_docs",
        "description": "Search the project's documentation and return the best passages.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
]

_ASKS = (
    "Why does {area} time out on large inputs? Start with the slowest step.",
    "Add a --dry-run option to the command that drives {area}.",
    "The nightly job for {area} failed again; find what changed.",
    "Write tests for the retry logic in {area}.",
    "Clean up the error messages in {area}; they don't say which record failed.",
    "Can {area} reuse the shared HTTP client instead of making its own?",
)
_CUES = (
    "By the way, I'm the tech lead for {area}, so explain trade-offs, not basics.",
    "Please never mock the database in tests for {area}; we got burnt by that last year.",
    "Remember that the freeze for {area} starts on 2026-12-04; nothing risky after that.",
    "Our incidents for {area} are tracked on the OPS board in Linear; link them there.",
    "I prefer one bundled PR over many small ones for changes to {area}.",
)


def saves_memory(turn: int) -> bool:
    """The turns whose user message holds something worth remembering: one in four."""
    return turn % 4 == 1


def rounds(turn: int) -> int:
    """How many rounds of tool calls the host makes before answering (2 to 5)."""
    return 2 + (turn * 7) % 4


def calls_in_round(turn: int, step: int) -> list[str]:
    """The tools of one round: one or two calls, reads more often than test runs."""
    first = ("Read", "Grep", "Read", "run_tests", "Read")[(turn + step) % 5]
    return [first, "Read"] if (turn + step) % 3 == 0 else [first]


def user_text(turn: int) -> str:
    area = _AREAS[turn % len(_AREAS)]
    text = _ASKS[turn % len(_ASKS)].format(area=area)
    if saves_memory(turn):
        text += " " + _CUES[(turn // 4) % len(_CUES)].format(area=area)
    return text


def answer_text(turn: int) -> str:
    area = _AREAS[turn % len(_AREAS)]
    steps = [
        f"I looked at how {area} handles this case and traced the call path from the "
        f"entry point down to the storage layer (turn {turn}).",
        "The slow part is a query issued once per record inside the loop; batching it "
        "removes most of the time, and the existing tests still pass.",
        "I changed the function to collect the keys first and fetch them in one call, "
        "added a test that covers an empty batch and a batch of a thousand records, and "
        "kept the public signature as it was.",
        "Not verified: the behaviour against the production data volume. The staging "
        "job tonight will tell; if it regresses, the change is a single commit to revert.",
    ]
    return "\n\n".join(steps[: 2 + turn % 3])


def tool_output(turn: int, step: int, name: str) -> str:
    """What the host's tool returned: a source file, matches, or a test run."""
    if name == "Read":
        lines = [
            f"{n:>5}\tdef step_{turn}_{step}_{n}(batch, *, timeout=30):  "
            f"# part {n} of the pipeline stage for record batches"
            for n in range(1, 60 + (turn * 13 + step * 7) % 50)
        ]
        return "\n".join(lines)
    if name == "Grep":
        return "\n".join(
            f"src/acme/stage_{turn}_{n}.py:{10 * n}: def handle_batch_{n}(records):"
            for n in range(1, 25)
        )
    lines = [f"tests/test_stage_{turn}.py::test_case_{n} PASSED" for n in range(1, 15 + turn % 10)]
    lines.append(f"tests/test_stage_{turn}.py::test_large_batch FAILED: timeout after 30s")
    lines.append(f"==== 1 failed, {14 + turn % 10} passed in 41.2s ====")
    return "\n".join(lines)


def tool_call(turn: int, step: int, index: int, name: str) -> ToolUseBlock:
    arguments: dict[str, Any]
    if name == "Read":
        arguments = {"file_path": f"/home/dev/acme/src/stage_{turn}_{step}_{index}.py"}
    elif name == "Grep":
        arguments = {"pattern": f"def handle_batch_{turn}", "path": "/home/dev/acme/src"}
    else:
        arguments = {"target": f"tests/test_stage_{turn}.py", "verbose": True}
    return ToolUseBlock(id=f"toolu_host_{turn:03d}_{step}_{index}", name=name, input=arguments)


def pauses(count: int) -> list[float]:
    """Seconds before each turn: mostly under four minutes, one in five over five."""
    rng = random.Random(SEED)
    out = [0.0]
    for _ in range(count - 1):
        long = rng.random() < 0.2
        out.append(rng.uniform(330.0, 1200.0) if long else rng.uniform(30.0, 240.0))
    return out


# --- compaction ------------------------------------------------------------------------------

SUMMARY_MAX_TOKENS = 20_000
"""The most a compaction's summary may hold: Claude Code 2.1.332 reserves ``min(the
model's maximum output, 20,000)`` tokens of the window for it."""
COMPACT_BUFFER_TOKENS = 13_000
"""Claude Code 2.1.332's margin below that reserve: it compacts once the context reaches
``window - min(max output, 20,000) - 13,000`` tokens (167,000 of a 200,000 window)."""
KEEP_TOKENS = 20_000
"""How much of the latest conversation a compaction keeps as it was, in whole turns (at
least the turn under way). This bench's choice: Claude Code's full compaction keeps none
and re-attaches recently read files instead; SDK agents keep a recent stretch."""
COMPACT_HEAD = "# Compact the conversation"
COMPACT_PROMPT = (
    COMPACT_HEAD
    + """

The conversation is close to the context window. Write a summary that lets you carry on \
the work without the messages it replaces: what the user asked for in each request and \
anything they said about how they want things done; the files, commands and results \
that matter; what was changed, what failed and why; and what is still to do. List every \
user request. Do not call tools; answer with the summary only."""
)
SUMMARY_LEAD = (
    "This conversation continues one that grew too long for the context window; "
    "its earlier part is summarised here.\n\n"
)


def compact_threshold(window: int, max_output_tokens: int | None) -> int:
    """The context size at which the host compacts, by Claude Code's rule: the window less
    the summary's reserve (the model's maximum output, at most 20,000) less 13,000."""
    reserve = min(max_output_tokens or SUMMARY_MAX_TOKENS, SUMMARY_MAX_TOKENS)
    return window - reserve - COMPACT_BUFFER_TOKENS


def rough_tokens(message: Message) -> int:
    """Characters / 4 of what a message carries, as Claude Code estimates the messages
    added since the last response's usage: text, thinking, tool inputs and results."""
    chars = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            chars += len(block.text)
        elif isinstance(block, ThinkingBlock):
            chars += len(block.thinking)
        elif isinstance(block, ToolUseBlock):
            chars += len(block.name) + len(json.dumps(block.input))
        elif isinstance(block, ToolResultBlock):
            content = block.content
            chars += (
                len(content) if isinstance(content, str) else len(json.dumps(content, default=str))
            )
    return chars // 4 + 4 * len(message.content)


def needs_compaction(last_context: int, added: Sequence[Message], threshold: int) -> bool:
    """Whether the next request would reach ``threshold``: the last response's context
    (its prompt and output, as the server billed them) plus an estimate of the messages
    added since."""
    return last_context + sum(rough_tokens(m) for m in added) >= threshold


def is_turn_start(message: Message) -> bool:
    """A user message the person typed (not tool results): where a turn begins."""
    return message.role == "user" and not any(
        isinstance(b, ToolResultBlock) for b in message.content
    )


def kept_start(conversation: Sequence[Message], keep_tokens: int) -> int:
    """Where the messages a compaction keeps begin: the start of the latest turn, or of an
    earlier one while the kept stretch stays within ``keep_tokens``. A kept stretch never
    begins with tool results (their calls would be gone)."""
    starts = [i for i, m in enumerate(conversation) if is_turn_start(m)]
    if not starts:
        return 0
    tail = [0] * (len(conversation) + 1)
    for index in range(len(conversation) - 1, -1, -1):
        tail[index] = tail[index + 1] + rough_tokens(conversation[index])
    chosen = starts[-1]
    for start in reversed(starts[:-1]):
        if tail[start] > keep_tokens:
            break
        chosen = start
    return chosen


def compacted(conversation: Sequence[Message], summary: str, keep_tokens: int) -> list[Message]:
    """The conversation after a compaction: the summary (flagged as one), then the kept
    recent messages unchanged (same objects, same ids)."""
    start = kept_start(conversation, keep_tokens)
    head = Message.user(SUMMARY_LEAD + summary, is_compact_summary=True)
    return [head, *conversation[start:]]


def is_compact_request(body: dict[str, Any]) -> bool:
    """Whether ``body`` is the host's summarising request: its last message holds the prompt."""
    messages = body.get("messages") or []
    if not messages:
        return False
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content.startswith(COMPACT_HEAD)
    return any(
        isinstance(b, dict) and str(b.get("text", "")).startswith(COMPACT_HEAD)
        for b in content or ()
    )


def compact_request(conversation: Sequence[Message]) -> list[Message]:
    """The messages of the summarising request: the conversation as the host would send it,
    the prompt added to its last user message (or after its last answer), so the request
    reads the prefix the host's own requests cached."""
    prompt = TextBlock(text=COMPACT_PROMPT)
    last = conversation[-1]
    if last.role == "user":
        merged = Message(role="user", content=(*last.content, prompt), uuid=last.uuid)
        return [*conversation[:-1], merged]
    return [*conversation, Message(role="user", content=(prompt,))]


# --- the scripted model --------------------------------------------------------------------


def _thought(text: str) -> ThinkingBlock:
    return ThinkingBlock(
        thinking=text, signature="sig-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    )


class Replies:
    """Answers every side alike: the host by its script, the memory agent as a good one."""

    def __init__(self, thinking: bool) -> None:
        self.turn = 0
        self.step = 0
        self.thinking = thinking

    def __call__(self, body: dict[str, Any]) -> Message | str:
        if is_memory_request(body):
            return self._memory(body)
        if is_compact_request(body):
            return self._with_thought(TextBlock(text=self.summary()))
        if self.step >= rounds(self.turn):
            return self._with_thought(TextBlock(text=answer_text(self.turn)))
        names = calls_in_round(self.turn, self.step)
        calls = [tool_call(self.turn, self.step, i, n) for i, n in enumerate(names)]
        self.step += 1
        return self._with_thought(TextBlock(text="Let me look first."), *calls)

    def summary(self) -> str:
        """A compaction's summary: every request so far, then a line on each turn's work."""
        asks = [f"- Turn {t}: {user_text(t)}" for t in range(self.turn + 1)]
        work = [
            f"- Turn {t}: traced the call path in {_AREAS[t % len(_AREAS)]}, batched the "
            "per-record query, added tests for an empty and a large batch; not verified "
            "against production volume."
            for t in range(self.turn)
        ]
        now = f"Turn {self.turn}, step {self.step}: {user_text(self.turn)}"
        return "\n".join(
            ["## User requests", *asks, "", "## Work done", *work, "", "## Current work", now]
        )

    def _with_thought(self, *blocks: TextBlock | ToolUseBlock) -> Message:
        if not self.thinking:
            return Message(role="assistant", content=blocks)
        thought = _thought(
            f"Turn {self.turn}, step {self.step}: what do I know, what do I still need to "
            "check, which file holds the call path, and is the test output consistent "
            "with the slow query I suspect? " * 6
        )
        return Message(role="assistant", content=(thought, *blocks))

    def _memory(self, body: dict[str, Any]) -> Message | str:
        request = parse_memory_request(body)
        wanted = [
            t
            for t in range(self.turn + 1)
            if saves_memory(t) and any(user_text(t) == text for text in request.new_texts)
        ]
        if not wanted or request.turn > 1:
            reply: Message | str = "Nothing new to save."
        else:
            saves = feedback_saves(wanted, user_text)
            reply = save_calls(request, saves)
        if self.thinking and body.get("thinking"):
            # Thinking stays on in a fork (the host's parameters), so its answers think too.
            thought = _thought("Is anything here worth keeping for a later conversation? " * 3)
            if isinstance(reply, str):
                return Message(role="assistant", content=(thought, TextBlock(text=reply)))
            return Message(role="assistant", content=(thought, *reply.content))
        return reply


# --- the sides --------------------------------------------------------------------------------


def usage_of(recorded: RecordedRequest) -> Usage:
    if recorded.usage is None:
        raise RuntimeError(f"a request was answered {recorded.status}, without usage")
    usage = recorded.usage
    breakdown = usage.get("cache_creation") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        cache_creation_1h_input_tokens=int(breakdown.get("ephemeral_1h_input_tokens") or 0),
    )


@dataclass
class Side:
    """The requests of one side, as the server reported them."""

    usages: list[Usage] = field(default_factory=list)

    def total(self) -> Usage:
        out = Usage()
        for usage in self.usages:
            out = out + usage
        return out

    def report(self, prices: Any) -> dict[str, Any]:
        total = self.total()
        prompt = total.total_input_tokens
        return {
            "requests": len(self.usages),
            "input_tokens": total.input_tokens,
            "cache_read_input_tokens": total.cache_read_input_tokens,
            "cache_creation_input_tokens": total.cache_creation_input_tokens,
            "output_tokens": total.output_tokens,
            "cache_read_share": round(total.cache_read_input_tokens / prompt, 4) if prompt else 0,
            "cost": round(sum(bill(u, prices) for u in self.usages), 1),
        }


class FreshAgent:
    """A memory agent of the user's own: the whole conversation each run, well cached."""

    def __init__(self, model: AnthropicModel, memory: Path, cwd: Path) -> None:
        self.model = model
        self.memory = MemoryDir(memory)
        self.cwd = cwd
        self.cursor: str | None = None
        """The id of the last message the previous run saw (Claude Code's cursor)."""

    async def run(self, conversation: Sequence[Message]) -> None:
        md = self.memory
        await asyncio.to_thread(md.ensure)
        index_path = md.entrypoint
        index = index_path.read_text() if index_path.exists() else None
        ids = [m.uuid for m in conversation]
        # After a compaction removed the cursor everything counts, as in Claude Code.
        start = ids.index(self.cursor) + 1 if self.cursor in ids else 0
        new = [m for m in conversation[start:] if m.role in ("user", "assistant")]
        parts = extract_prompt_parts(
            len(new), format_manifest(md.scan()), memory_dir=str(md.root), index_text=index
        )
        shown = [(i, r) for i, m in enumerate(conversation) if (r := render(m, 2_000)) is not None]
        rendered = [r for _, r in shown]
        context = ToolContext(write_guard=memory_write_guard(md))
        if index is not None:
            stat = index_path.stat()
            context.read_files[str(index_path.resolve())] = FileStamp(
                mtime_ns=stat.st_mtime_ns, size=stat.st_size
            )
        tools = builtin_tools(self.cwd)
        params = CacheSafeParams(
            model=self.model,
            system=standalone_system_prompt(parts.instructions),
            tools=[t.definition() for t in tools if t.name in ("Read", "Write", "Edit")],
        )
        points = [len(rendered) - 1]
        # Where the previous run ended: the last message before the cursor, now (a
        # compaction moves it, or removes it).
        previous = [n for n, (i, _) in enumerate(shown) if i < start]
        if start and previous:
            points.append(previous[-1])
        await run_forked_agent(
            params,
            rendered,
            [Message.user(parts.whole)],
            tools=tools,
            can_use_tool=auto_mem_can_use_tool(md, cwd=self.cwd),
            context=context,
            cache_points=points,
            end_after_writes=True,
        )
        self.cursor = conversation[-1].uuid


async def session(
    variant: str, mode: str, turns: int, root: Path, context: int | None = None
) -> dict[str, Any]:
    """One host session with the extractor in ``mode``; in ``auto`` the fresh agent too.
    ``context``: a context window in place of the model's (a short run that compacts)."""
    model_name, thinking = VARIANTS[variant]
    schedule = pauses(turns)
    clock = FakeClock(start=1_000_000.0)
    replies = Replies(thinking)
    base = root / f"{variant}-{mode}"
    cwd = base / "project"
    cwd.mkdir(parents=True)
    tools = [t.definition() for t in builtin_tools(cwd)] + HOST_TOOLS
    params: dict[str, Any] = {"max_tokens": 8192}
    if thinking:
        params["thinking"] = THINKING
    sink = CollectingSink()
    host, memory, fresh_side = Side(), Side(), Side()
    retry = RetryPolicy(max_retries=0)
    async with (
        FakeAnthropicServer(handler=replies, clock=clock, context_tokens=context) as server,
        FakeAnthropicServer(handler=replies, clock=clock, context_tokens=context) as fresh_server,
    ):
        # The fake stands for Anthropic's API as it was while it still served Sonnet 4.5
        # (retired 2026-11-30), the model whose dropped thinking these variants measure.
        served = datetime.date(2026, 11, 1)
        model = AnthropicModel(
            model_name, api_key="k", base_url=server.base_url, retry=retry, today=served
        )
        request_params = CacheSafeParams(model=model, system=SYSTEM, tools=tools, params=params)
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(base / "memory", model, config, sink=sink, clock=clock)
        fresh_model = AnthropicModel(
            model_name, api_key="k", base_url=fresh_server.base_url, retry=retry, today=served
        )
        fresh = FreshAgent(fresh_model, base / "fresh-memory", cwd) if mode == "auto" else None
        family = model_family(model_name, "anthropic")
        window = context or family.context_tokens
        threshold = compact_threshold(window, family.max_output_tokens)
        conversation: list[Message] = []
        last_context = 0  # the last response's prompt and output, as billed
        answered = 0  # messages up to and with that response
        compactions: list[int] = []  # the turns a compaction happened in
        seen_ids: set[str] = set()
        new_messages = 0  # messages the extractor had not been shown before
        run_turns: list[dict[str, Any]] = []
        for turn, pause in zip(range(turns), schedule, strict=True):
            clock.advance(pause)
            replies.turn, replies.step = turn, 0
            conversation.append(Message.user(user_text(turn)))
            compacted_now = False
            while True:
                if needs_compaction(last_context, conversation[answered:], threshold):
                    # Claude Code compacts before the request that would pass its
                    # threshold: one summarising request on the host's own prefix.
                    summary_request = ModelRequest(
                        system=SYSTEM,
                        tools=tools,
                        messages=tuple(compact_request(conversation)),
                        params={**params, "max_tokens": SUMMARY_MAX_TOKENS},
                    )
                    summarised = await model.request(summary_request)
                    conversation = compacted(conversation, summarised.message.text, KEEP_TOKENS)
                    compactions.append(turn)
                    compacted_now = True
                    clock.advance(20.0)  # the summary takes a while to write
                    last_context, answered = 0, 0  # measured again by the next response
                request = ModelRequest(
                    system=SYSTEM, tools=tools, messages=tuple(conversation), params=params
                )
                sent_at = clock()
                response = await model.request(request)
                conversation.append(response.message)
                billed = response.usage
                last_context = billed.total_input_tokens + billed.output_tokens
                answered = len(conversation)
                if not response.message.tool_uses:
                    break
                clock.advance(4.0)  # the tools run
                results = tuple(
                    ToolResultBlock(
                        tool_use_id=use.id, content=tool_output(turn, replies.step, use.name)
                    )
                    for use in response.message.tool_uses
                )
                conversation.append(Message(role="user", content=results))
            clock.advance(2.0)
            seen = len(server.requests)
            extractor.on_turn_end(
                TurnContext(
                    messages=tuple(conversation),
                    params=request_params,
                    cwd=str(cwd),
                    last_request_at=sent_at,
                )
            )
            runs_before = len(sink.named("extract.run"))
            await extractor.drain(timeout=120)
            fresh_ids = [
                m.uuid for m in conversation if m.uuid not in seen_ids and not m.is_compact_summary
            ]
            new_messages += len(fresh_ids)
            seen_ids.update(fresh_ids)
            run_usages = [usage_of(r) for r in server.requests[seen:]]
            memory.usages += run_usages
            events = sink.named("extract.run")[runs_before:]
            run_turns.append(
                {
                    "turn": turn,
                    "compacted": compacted_now,
                    "modes": [str(e.fields["mode"]) for e in events],
                    "estimated": sum(float(e.fields["estimated_cost"]) for e in events),
                    "usages": run_usages,
                }
            )
            if fresh is not None:
                before = len(fresh_server.requests)
                await fresh.run(conversation)
                fresh_side.usages += [usage_of(r) for r in fresh_server.requests[before:]]
        host_requests = [r for r in server.requests if not is_memory_request(r.body)]
        host.usages = [usage_of(r) for r in host_requests]
        summaries = Side([usage_of(r) for r in host_requests if is_compact_request(r.body)])
        for used in (model, fresh_model):
            await used.aclose()
        server.assert_no_errors()
        fresh_server.assert_no_errors()
    runs = sink.named("extract.run")
    telemetry = {key: sum(int(e.fields[key]) for e in runs) for key in USAGE_KEYS}
    total = memory.total()
    covered = sum(int(e.fields["message_count"]) for e in runs)
    return {
        "host": host,
        "memory": memory,
        "fresh": fresh_side if fresh is not None else None,
        "summaries": summaries,
        "run_turns": run_turns,
        "window": {
            "context_window": window,
            "compact_threshold": threshold,
            "compactions": len(compactions),
            "compaction_turns": compactions,
            "host_peak_prompt_tokens": max(u.total_input_tokens for u in host.usages),
        },
        "checks": {
            "runs": len(runs),
            "errors": len(sink.named("extract.error")),
            "memories_saved": sum(int(e.fields["memories_saved"]) for e in runs),
            "messages_covered": covered,
            # Every message the host added, each counted once (a compaction's summary
            # and the messages it keeps are not new).
            "messages": new_messages,
            "messages_covered_again": covered - new_messages,
            "modes": {
                m: sum(1 for e in runs if e.fields["mode"] == m) for m in ("fork", "standalone")
            },
            "telemetry_matches_server": telemetry
            == {
                "input_tokens": total.input_tokens,
                "cache_read_input_tokens": total.cache_read_input_tokens,
                "cache_creation_input_tokens": total.cache_creation_input_tokens,
                "output_tokens": total.output_tokens,
            },
        },
    }


def breakdown(run_turns: Sequence[dict[str, Any]], prices: Any) -> dict[str, dict[str, Any]]:
    """Where a memory side's bill goes: its runs by mode, cold or warm (under half of the
    run's prompt read from the cache), and in the turn of a compaction or the one after;
    beside each, what the planner estimated for those runs."""
    out: dict[str, dict[str, Any]] = {}

    def add(key: str, cost: float, estimated: float) -> None:
        entry = out.setdefault(key, {"runs": 0, "cost": 0.0, "estimated": 0.0})
        entry["runs"] += 1
        entry["cost"] = round(entry["cost"] + cost, 1)
        entry["estimated"] = round(entry["estimated"] + estimated, 1)

    for index, turn in enumerate(run_turns):
        usages: list[Usage] = turn["usages"]
        if not usages:
            continue
        cost = sum(bill(u, prices) for u in usages)
        prompt = sum(u.total_input_tokens for u in usages)
        read = sum(u.cache_read_input_tokens for u in usages)
        mode = "+".join(turn["modes"]) or "none"
        warmth = "warm" if prompt and read / prompt >= 0.5 else "cold"
        add(f"{mode}_{warmth}", cost, turn["estimated"])
        near = turn["compacted"] or (index > 0 and run_turns[index - 1]["compacted"])
        if near:
            add("around_compaction", cost, turn["estimated"])
    return dict(sorted(out.items()))


async def measure(
    turns: int, root: Path, variants: Sequence[str], context: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in variants:
        prices = model_family(VARIANTS[variant][0], "anthropic").prices
        runs = {mode: await session(variant, mode, turns, root, context) for mode in MODES}
        host = runs["auto"]["host"].report(prices)
        sides: dict[str, Any] = {"host": host}
        for mode in MODES:
            sides[f"memdir_{mode}"] = runs[mode]["memory"].report(prices)
        fresh = runs["auto"]["fresh"]
        assert fresh is not None
        sides["fresh_agent"] = fresh.report(prices)
        out[variant] = {
            "memory_to_host": {
                name: round(side["cost"] / host["cost"], 4)
                for name, side in sides.items()
                if name != "host"
            },
            "memdir_auto_to_fresh_agent": round(
                sides["memdir_auto"]["cost"] / sides["fresh_agent"]["cost"], 4
            ),
            "fork_cache_read_share": sides["memdir_fork"]["cache_read_share"],
            **runs["auto"]["window"],
            "host_compaction_cost": runs["auto"]["summaries"].report(prices)["cost"],
            "memory_breakdown": {
                f"memdir_{mode}": breakdown(runs[mode]["run_turns"], prices) for mode in MODES
            },
            "host_cost_by_mode": {
                mode: runs[mode]["host"].report(prices)["cost"] for mode in MODES
            },
            "checks": {mode: runs[mode]["checks"] for mode in MODES},
            "sides": sides,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--context",
        type=int,
        default=None,
        help="a context window in tokens in place of the model's (for a short run that compacts)",
    )
    args = parser.parse_args()
    if args.turns < 2:
        parser.error("--turns must be at least 2")
    if args.context is not None and args.context <= SUMMARY_MAX_TOKENS + COMPACT_BUFFER_TOKENS:
        parser.error(f"--context must be over {SUMMARY_MAX_TOKENS + COMPACT_BUFFER_TOKENS}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args.turns, Path(tmp), variants, args.context))
    print(
        json.dumps(
            {
                "bench": "cache_share",
                "turns": args.turns,
                "system_prompt_tokens": (len(SYSTEM) + 3) // 4,
                "pauses_over_5_min": sum(1 for p in pauses(args.turns) if p > 300),
                "variants": result,
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )
    bad = [
        (variant, mode)
        for variant, r in result.items()
        for mode, check in r["checks"].items()
        if check["errors"]
        or check["messages_covered"] < check["messages"]
        or not check["telemetry_matches_server"]
    ]
    if bad:
        print(
            f"runs that failed, missed messages or disagree with the server: {bad}", file=sys.stderr
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()
