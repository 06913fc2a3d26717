"""What the memory agent costs when it shares the host agent's prompt cache, and without.

A coding agent (a system prompt of a few thousand tokens, the builtin tools plus two of
its own) holds a conversation of ``--turns`` turns through ``AnthropicModel`` against
``FakeAnthropicServer``; some turns read a file or run the tests before answering. After
every turn ``MemoryExtractor.on_turn_end`` gets the host's request (``CacheSafeParams``)
and is drained, so each turn gets its own run. The fork writes a memory on some turns
(one ``Write``, then a closing line) and answers "Nothing new to save." on the others.

Side by side, in the same run and with the same replies:

- ``main_agent``: the host's own requests;
- ``fork_shared``: the memory agent inside the host's cache (the extractor, as shipped);
- ``fork_unshared``: the same prompt and replies through ``run_forked_agent`` without
  sharing: memdir's standalone system prompt and tool definitions, and the whole
  transcript rendered into ONE user message, on a server of its own (its own system and
  tools prefix may be cached across runs; the transcript never is);
- ``standalone``: ``MemoryExtractor`` with ``TurnContext(params=None)``, which caches
  across its own runs (informational).

Usage comes from the fake server's recorded requests (the ``usage`` it reported for each,
exact), split into host and fork requests by the extraction prompt; the fork's sums are
checked against the ``extract.run`` telemetry events. The fork's cache writes are what
no earlier request held: its extraction prompt and the turn's final answer (and, after a
``Write``, its own tool call and result). Cost is in billed-token equivalents of the
input price: cache read 0.1, cache write 1.25, plain input 1, output 5. Tokens are the
fake's estimate, characters / 4.

    python bench/cache_share.py [--turns 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memdir.extract import (
    STANDALONE_SYSTEM_PROMPT,
    ExtractConfig,
    MemoryExtractor,
    TurnContext,
)
from memdir.extract._standalone import build_standalone_context
from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, RecordedRequest, Reply
from memdir.tools import ToolContext, builtin_tools

PROMPT_HEAD = "# Memory update"
"""How the extraction prompt starts (memdir.extract._prompts): it marks a fork request."""
MEMORY_DIR_LINE = re.compile(r"The memory directory is `([^`]+)`\.")
WEIGHTS = {
    "input_tokens": 1.0,
    "cache_read_input_tokens": 0.1,
    "cache_creation_input_tokens": 1.25,
    "output_tokens": 5.0,
}
USAGE_KEYS = tuple(WEIGHTS)
PARAMS: dict[str, Any] = {"max_tokens": 8192, "temperature": 0.2}

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
    """The turns whose user message holds something worth remembering."""
    return turn % 5 == 2


def tool_for(turn: int) -> str | None:
    """The host tool the main agent calls before answering on ``turn``, if any."""
    return ("Read", "run_tests", None)[turn % 3]


def user_text(turn: int) -> str:
    area = _AREAS[turn % len(_AREAS)]
    text = _ASKS[turn % len(_ASKS)].format(area=area)
    if saves_memory(turn):
        text += " " + _CUES[(turn // 5) % len(_CUES)].format(area=area)
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


def tool_output(turn: int, name: str) -> str:
    """What the host's tool returned: a source file, or a test run."""
    if name == "Read":
        lines = [
            f"{n:>5}\tdef step_{turn}_{n}(batch, *, timeout=30):  "
            f"# part {n} of the pipeline stage for record batches"
            for n in range(1, 40 + turn % 20)
        ]
        return "\n".join(lines)
    lines = [f"tests/test_stage_{turn}.py::test_case_{n} PASSED" for n in range(1, 15 + turn % 10)]
    lines.append(f"tests/test_stage_{turn}.py::test_large_batch FAILED: timeout after 30s")
    lines.append(f"==== 1 failed, {14 + turn % 10} passed in 41.2s ====")
    return "\n".join(lines)


def tool_call(turn: int, name: str) -> ToolUseBlock:
    arguments: dict[str, Any]
    if name == "Read":
        arguments = {"file_path": f"/home/dev/acme/src/stage_{turn}.py"}
    else:
        arguments = {"target": f"tests/test_stage_{turn}.py", "verbose": True}
    return ToolUseBlock(id=f"toolu_host_{turn:03d}", name=name, input=arguments)


# --- the fake model -------------------------------------------------------------------------


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def is_fork_request(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is the memory agent's: one of its user messages is the prompt."""
    return any(
        m.get("role") == "user" and _text_of(m).startswith(PROMPT_HEAD) for m in body["messages"]
    )


class Replies:
    """Answers every side alike; ``turn`` is the host turn being processed."""

    def __init__(self) -> None:
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if is_fork_request(body):
            return self._fork(messages)
        name = tool_for(self.turn)
        if name is None or _is_tool_result(messages[-1]):
            return answer_text(self.turn)
        intro = TextBlock(text=f"Let me look at that first ({name}).")
        return Message(role="assistant", content=(intro, tool_call(self.turn, name)))

    def _fork(self, messages: Sequence[Mapping[str, Any]]) -> Reply:
        name = f"note_turn_{self.turn:03d}.md"
        if _is_tool_result(messages[-1]):
            return f"Saved {name}."
        if not saves_memory(self.turn):
            return "Nothing new to save."
        found = MEMORY_DIR_LINE.search(_text_of(messages[-1]))
        if found is None:
            raise ValueError("the extraction prompt names no memory directory")
        body = (
            f"---\nname: Note from turn {self.turn}\n"
            f"description: What the user said about their work in turn {self.turn}\n"
            f"type: feedback\n---\n\n{user_text(self.turn)}\n\n"
            "**Why:** the user said so explicitly.\n"
            "**How to apply:** whenever this part of the project comes up.\n"
        )
        write = ToolUseBlock(
            id=f"toolu_mem_{self.turn:03d}",
            name="Write",
            input={"file_path": f"{found.group(1)}/{name}", "content": body},
        )
        intro = TextBlock(text="One thing here is worth keeping.")
        return Message(role="assistant", content=(intro, write))


# --- accounting -----------------------------------------------------------------------------


def totals(requests: Sequence[RecordedRequest]) -> dict[str, Any]:
    """Token sums, request count, billed-token cost and cache-read share of ``requests``."""
    sums = dict.fromkeys(USAGE_KEYS, 0)
    for request in requests:
        if request.usage is None:
            raise RuntimeError(f"a request was answered {request.status}, without usage")
        for key in USAGE_KEYS:
            sums[key] += int(request.usage.get(key) or 0)
    cost = sum(WEIGHTS[key] * sums[key] for key in USAGE_KEYS)
    prompt = sums["input_tokens"] + sums["cache_read_input_tokens"]
    prompt += sums["cache_creation_input_tokens"]
    return {
        "requests": len(requests),
        **sums,
        "cache_read_share": round(sums["cache_read_input_tokens"] / prompt, 4) if prompt else 0.0,
        "cost_billed_tokens": round(cost, 1),
    }


def telemetry_totals(sink: CollectingSink) -> dict[str, int]:
    runs = sink.named("extract.run")
    return {key: sum(int(e.fields[key]) for e in runs) for key in USAGE_KEYS}


def one_message_transcript(messages: Sequence[Message]) -> Message:
    """The whole conversation as one user message, rendered as the standalone mode does."""
    config = ExtractConfig()
    rendered = build_standalone_context(
        messages,
        cursor_index=0,
        budget_tokens=config.context_budget_tokens,
        tool_result_chars=config.tool_result_chars,
    ).messages
    parts = [f"{'User' if m.role == 'user' else 'Assistant'}:\n{m.text}" for m in rendered]
    return Message.user("# Conversation\n\n" + "\n\n".join(parts))


# --- the run ------------------------------------------------------------------------------


def anthropic(server: FakeAnthropicServer) -> AnthropicModel:
    return AnthropicModel(
        "claude-bench", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
    )


async def measure(turns: int, root: Path) -> dict[str, Any]:
    cwd = root / "project"
    cwd.mkdir()
    # Paths of equal length, so every side's prompts and replies have the same size.
    shared_dir, unshared_dir, standalone_dir = (root / s / "memory" for s in ("a", "b", "c"))
    tools = [t.definition() for t in builtin_tools(cwd)] + HOST_TOOLS
    memdir_tools = [t.definition() for t in builtin_tools(cwd)]
    replies = Replies()
    shared_sink, standalone_sink = CollectingSink(), CollectingSink()
    async with (
        FakeAnthropicServer(handler=replies) as host_server,
        FakeAnthropicServer(handler=replies) as unshared_server,
        FakeAnthropicServer(handler=replies) as standalone_server,
    ):
        model = anthropic(host_server)
        unshared_model = anthropic(unshared_server)
        standalone_model = anthropic(standalone_server)
        params = CacheSafeParams(model=model, system=SYSTEM, tools=tools, params=PARAMS)
        shared = MemoryExtractor(shared_dir, model, ExtractConfig(), sink=shared_sink)
        standalone = MemoryExtractor(
            standalone_dir, standalone_model, ExtractConfig(), sink=standalone_sink
        )
        conversation: list[Message] = []
        prompt_chars: list[int] = []
        unshared_saved = 0
        for turn in range(turns):
            replies.turn = turn
            conversation.append(Message.user(user_text(turn)))
            while True:
                request = ModelRequest(
                    system=SYSTEM, tools=tools, messages=tuple(conversation), params=PARAMS
                )
                response = await model.request(request)
                conversation.append(response.message)
                if not response.message.tool_uses:
                    break
                results = tuple(
                    ToolResultBlock(tool_use_id=use.id, content=tool_output(turn, use.name))
                    for use in response.message.tool_uses
                )
                conversation.append(Message(role="user", content=results))
            snapshot = tuple(conversation)
            seen = len(host_server.requests)
            shared.on_turn_end(TurnContext(messages=snapshot, params=params, cwd=str(cwd)))
            await shared.drain(timeout=60)
            forks = [r for r in host_server.requests[seen:] if is_fork_request(r.body)]
            if not forks:
                raise RuntimeError(f"turn {turn}: the extractor sent no request")
            prompt = _text_of(forks[0].body["messages"][-1])
            prompt_chars.append(len(prompt))
            unshared_prompt = prompt.replace(str(shared_dir), str(unshared_dir))
            unshared = await run_forked_agent(
                CacheSafeParams(
                    model=unshared_model, system=STANDALONE_SYSTEM_PROMPT, tools=memdir_tools
                ),
                [one_message_transcript(snapshot)],
                [Message.user(unshared_prompt)],
                tools=builtin_tools(cwd),
                can_use_tool=auto_mem_can_use_tool(unshared_dir, cwd=cwd),
                max_turns=ExtractConfig().max_turns,
                context=ToolContext(write_guard=memory_write_guard(unshared_dir)),
            )
            unshared_saved += len(unshared.written_paths)
            standalone.on_turn_end(TurnContext(messages=snapshot, cwd=str(cwd)))
            await standalone.drain(timeout=60)
        for client_model in (model, unshared_model, standalone_model):
            await client_model.client.close()
        for server in (host_server, unshared_server, standalone_server):
            server.assert_no_errors()
        host_requests = host_server.requests
        unshared_requests = unshared_server.requests
        standalone_requests = standalone_server.requests

    main_requests = [r for r in host_requests if not is_fork_request(r.body)]
    fork_requests = [r for r in host_requests if is_fork_request(r.body)]
    sides = {
        "main_agent": totals(main_requests),
        "fork_shared": totals(fork_requests),
        "fork_unshared": totals(unshared_requests),
        "standalone": totals(standalone_requests),
    }
    last_main = main_requests[-1].usage or {}
    runs = shared_sink.named("extract.run")
    checks = {
        "fork_runs": len(runs),
        "fork_runs_equal_turns": len(runs) == turns,
        "standalone_runs": len(standalone_sink.named("extract.run")),
        "extract_errors": len(shared_sink.named("extract.error"))
        + len(standalone_sink.named("extract.error")),
        "memories_saved": sum(int(e.fields["memories_saved"]) for e in runs),
        "unshared_memories_saved": unshared_saved,
        "standalone_memories_saved": sum(
            int(e.fields["memories_saved"]) for e in standalone_sink.named("extract.run")
        ),
        "telemetry_matches_server": telemetry_totals(shared_sink)
        == {k: sides["fork_shared"][k] for k in USAGE_KEYS},
        "same_output_tokens_shared_unshared": sides["fork_shared"]["output_tokens"]
        == sides["fork_unshared"]["output_tokens"],
    }
    setup = {
        "system_prompt_tokens": (len(SYSTEM) + 3) // 4,
        "host_tools": len(tools),
        "extraction_prompt_tokens_mean": round(sum(prompt_chars) / len(prompt_chars) / 4),
        "last_main_request_input_tokens": sum(
            int(last_main.get(k) or 0)
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        ),
    }
    return {"checks": checks, "setup": setup, "sides": sides}


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return round(float(a["cost_billed_tokens"]) / float(b["cost_billed_tokens"]), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args.turns, Path(tmp)))
    sides = result["sides"]
    checks = result["checks"]
    print(
        json.dumps(
            {
                "bench": "cache_share",
                "turns": args.turns,
                **checks,
                "fork_cache_read_share": sides["fork_shared"]["cache_read_share"],
                "ratios": {
                    "fork_shared_to_fork_unshared": ratio(
                        sides["fork_shared"], sides["fork_unshared"]
                    ),
                    "fork_shared_to_main_agent": ratio(sides["fork_shared"], sides["main_agent"]),
                    "standalone_to_fork_shared": ratio(sides["standalone"], sides["fork_shared"]),
                    "standalone_to_fork_unshared": ratio(
                        sides["standalone"], sides["fork_unshared"]
                    ),
                },
                "cost_weights": WEIGHTS,
                "usage_source": "fake server's recorded usage; fork checked against extract.run",
                "setup": result["setup"],
                "sides": sides,
                "seconds": round(time.perf_counter() - started, 2),
            },
            indent=2,
        )
    )
    if not (checks["fork_runs_equal_turns"] and checks["telemetry_matches_server"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
