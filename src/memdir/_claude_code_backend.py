"""The memory agent run inside the user's own Claude Code, through the Claude Agent SDK.

Most Claude Code users log in with a subscription and have no API key that memdir could
use. Their Claude Code can still run the memory agent: the SDK starts the CLI (the one
that ran the hook, with the user's own login and settings), which resumes the session as
a *fork* — a new session id, the user's transcript left as it is — and sends the
session's own request (same system prompt, tools and messages, so the prompt cache the
session just wrote is read back) followed by memdir's extraction prompt as a new user
message. Every tool call the fork makes is decided by memdir's gate
(:func:`memdir.permissions.auto_mem_can_use_tool`): reading anywhere, read-only commands,
writes only inside the memory folder.

Three things keep the fork from starting more work than its own run:

- its environment carries :data:`FORK_ENV`, which the hook's quick path checks first, so
  the fork's own Stop hook (the user's settings still hold memdir's) does nothing;
- it is not saved as a session (``--no-session-persistence``): nothing new appears in
  ``claude --resume`` and no transcript of it is left for a hook to read;
- Claude Code's own post-turn extractor (on where its server flags turn it on) would run
  after the fork's turn as after any other; the fork's settings make Claude Code ask
  before any edit in the memory folder (the question goes to memdir's gate), and the
  extractor skips a run whose writes would need asking.

The cursor and the report are those of the other backends (:class:`TranscriptReport`,
one cursor per session in the memory folder's state file).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir._cli._run import (
    RUN_LOCK,
    RUN_LOCK_TIMEOUT,
    TranscriptReport,
    caught_up,
    completed_turn_ends,
    new_report,
    resume_index,
    session_of,
)
from memdir._hook_entry import FORK_ENV
from memdir.errors import MemdirError, StoreError, one_line
from memdir.extract._coordinator import wrote_memory
from memdir.extract._prompts import extract_prompt_parts
from memdir.messages import model_visible
from memdir.models._anthropic import MEMDIR_ANTHROPIC_API_KEY_ENV
from memdir.permissions import auto_mem_can_use_tool
from memdir.state import SessionState, StateFile
from memdir.store import MemoryDir, format_manifest, index_memory_file
from memdir.store._atomic import STATE_DIR_NAME
from memdir.store._provenance import record_changes
from memdir.transcripts._lines import NotRegularError, Overlong, open_regular, read_lines

if TYPE_CHECKING:
    from memdir.telemetry import Sink
    from memdir.transcripts import Transcript

__all__ = [
    "FORK_ENV",
    "FORK_TIMEOUT",
    "MAX_TURNS",
    "ClaudeCodeError",
    "ClaudeCodeRun",
    "extract_through_claude_code",
    "fork_environment",
]

MAX_TURNS = 5
"""Model requests the fork may make (DESIGN §3 ``max_turns``)."""

FORK_TIMEOUT = 300.0
"""Seconds one run inside Claude Code may take. The CLI retries an endpoint it cannot
reach for minutes; the run holds the memory folder's lock meanwhile, so it is cut off
(and its messages tried again next time)."""

# What the CLI sets for the hooks it runs, naming the session that ran them (seen in a
# hook's environment under 2.1.332). The fork is a session of its own: passed on, these
# would make it pose as a child of a session that has already ended.
_PARENT_SESSION_VARS = (
    "CLAUDECODE",
    "CLAUDE_PID",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_SESSION_ATTENDED",
    "CLAUDE_PROJECT_DIR",
    # Turns on Claude Code's hosted post-turn extractor; the fork is memdir's extractor.
    "CLAUDE_CODE_POST_TURN_MEMORY",
)

_WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})


class ClaudeCodeError(MemdirError):
    """The Claude Code run failed: the CLI could not start, or ended in an error."""


@dataclass(frozen=True, kw_only=True)
class ClaudeCodeRun:
    """What one fork inside Claude Code did."""

    written: tuple[str, ...]
    """The files its Write/Edit calls changed (calls that succeeded), in call order."""
    denied: tuple[str, ...]
    """The names of the tool calls memdir's gate refused."""
    usage: Mapping[str, Any]
    """The CLI's token usage for the whole run (``input_tokens``,
    ``cache_read_input_tokens``, ``cache_creation_input_tokens``, ``output_tokens``)."""
    turns: int
    """Model requests made."""
    model: str | None
    """The model the fork ran on."""


def fork_environment(
    env: Mapping[str, str], *, thinking_display: str | None = None
) -> dict[str, str]:
    """The forked CLI's environment: ``env`` without the parent session's markers, with
    :data:`FORK_ENV` set.

    A change of thinking parameters drops the cached messages, so the fork asks as the
    session asked: driven by the SDK, the CLI asks for ``thinking.display: "updates"``
    unless ``CLAUDE_CODE_THINKING_DISPLAY_UPDATES`` is off, where ``claude -p`` sends
    ``"omitted"`` (``thinking_display``, read from the session's recorded request).
    """
    # memdir's own key bills memdir's requests, never Claude Code's.
    dropped = {*_PARENT_SESSION_VARS, MEMDIR_ANTHROPIC_API_KEY_ENV}
    out = {k: v for k, v in env.items() if k not in dropped}
    out[FORK_ENV] = "1"
    if thinking_display == "omitted":
        out["CLAUDE_CODE_THINKING_DISPLAY_UPDATES"] = "0"
    return out


# Tools Claude Code offers only when a program drives it through the SDK (it can then
# put a question to that program); a session run without the SDK never had them.
_SDK_ONLY_TOOLS = ("AskUserQuestion",)


@dataclass(frozen=True)
class _HostRequest:
    model: str | None
    """The model of the session's last request."""
    missing_tools: tuple[str, ...]
    """Tools the SDK-driven fork would offer that the session's request did not."""
    thinking_display: str | None = None
    """The session's ``thinking.display`` (``omitted`` in ``claude -p``); the CLI driven
    by the SDK asks for ``updates`` unless told."""


def _host_request(path: Path) -> _HostRequest:
    """What the fork must match of the session's last request for its prompt cache to be
    read back: its model (Claude Code records each request as an ``api-request`` line,
    its tools in an ``api-request-shape`` line; else the model the last answer names)
    and the tools it offered. A tool list that differs, or another model, and the fork
    pays for the whole conversation again."""
    requested = answered = display = None
    tools: list[str] | None = None
    try:
        # Line by line in bounded memory, as the loader reads it (an over-long line is
        # no part of any request); never a pipe or a device.
        handle, _ = open_regular(path)
        with handle:
            for _, raw in read_lines(handle):
                if isinstance(raw, Overlong):
                    continue
                line = raw.decode("utf-8", errors="replace")
                if '"api-request' not in line and '"assistant"' not in line:
                    continue
                try:
                    entry = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(entry, dict):
                    continue
                kind = entry.get("type")
                if kind == "api-request-shape":
                    shape = entry.get("shape")
                    listed = shape.get("tools") if isinstance(shape, dict) else None
                    if isinstance(listed, list):
                        tools = [str(t.get("name")) for t in listed if isinstance(t, dict)]
                    continue
                holder = entry.get("params") if kind == "api-request" else entry.get("message")
                name = holder.get("model") if isinstance(holder, dict) else None
                # "<synthetic>" marks answers the CLI made up (an error, an interruption).
                if not isinstance(name, str) or not name or name.startswith("<"):
                    continue
                if kind == "api-request":
                    requested = name
                    thinking = holder.get("thinking") if isinstance(holder, dict) else None
                    shown = thinking.get("display") if isinstance(thinking, dict) else None
                    display = shown if isinstance(shown, str) else None
                elif kind == "assistant":
                    answered = name
    except (OSError, NotRegularError):
        return _HostRequest(None, ())
    missing = () if tools is None else tuple(t for t in _SDK_ONLY_TOOLS if t not in tools)
    return _HostRequest(requested or answered, missing, display)


def _extraction_prompt(memory: MemoryDir, new_messages: int) -> str:
    """memdir's fork prompt for ``new_messages`` new messages, as the in-process fork
    sends it: the memory files newest first. The index is neither shown nor left to the
    agent: memdir writes its lines after the fork, from what it saved (_index_written)."""
    return extract_prompt_parts(
        new_messages,
        format_manifest(memory.scan()),
        memory_dir=str(memory.root),
        memdir_indexes=True,
    ).whole


def _memory_files(memory: MemoryDir) -> set[str]:
    """The real paths of the memory folder's ``*.md`` files (memdir's state left out)."""
    return {
        os.path.realpath(p)
        for p in memory.root.rglob("*.md")
        if STATE_DIR_NAME not in p.relative_to(memory.root).parts
    }


def _record_written(
    memory: MemoryDir,
    written: Sequence[str],
    existed: set[str],
    *,
    session: str | None,
    messages: Sequence[str],
) -> None:
    """Log the memories Claude Code's fork wrote, for their history: one run, the
    session's messages it covered, and which files are new."""
    record_changes(
        memory,
        written,
        by="claude-code",
        run=uuid.uuid4().hex,
        session=session,
        messages=messages,
        created=[p for p in written if os.path.realpath(p) not in existed],
    )


def _index_written(memory: MemoryDir, cwd: str, paths: Sequence[str]) -> None:
    """Each memory the fork wrote, given its ``MEMORY.md`` line (or, emptied, rid of it).

    The CLI's own Write and Edit ran, not memdir's, so no line was written with the
    file; the prompt told the agent to leave the index to memdir. An index locked by
    another process for long is left to the next run's repair step."""
    for raw in paths:
        with contextlib.suppress(StoreError):
            index_memory_file(memory, Path(os.path.join(cwd, raw)))


def _ask_before_memory_writes(memory: MemoryDir) -> dict[str, Any]:
    """Settings for the fork that make Claude Code ask before any edit in the memory
    folder. The question goes to memdir's gate (``can_use_tool``), which allows what it
    allows; Claude Code's own extractor, which would otherwise run after the fork's turn
    as after any other, checks such a rule first and skips a run whose writes would need
    asking (``[extractMemories] skipping — the ask rule … would refuse memory writes``)."""
    # "//" starts an absolute path in a permission rule; Edit rules cover Write too.
    folder = "//" + str(memory.root).lstrip("/")
    return {"permissions": {"ask": [f"Edit({folder}/**)"]}}


async def run_fork(
    *,
    session_id: str,
    prompt: str,
    memory: MemoryDir,
    cwd: str,
    cli_path: str,
    env: Mapping[str, str],
    model: str | None = None,
    max_turns: int = MAX_TURNS,
    disallowed_tools: Sequence[str] = (),
    thinking_display: str | None = None,
    sink: Sink | None = None,
) -> ClaudeCodeRun:
    """Resume ``session_id`` in Claude Code as a fork with ``prompt`` as the new user
    message; every tool call goes through memdir's gate for ``memory``.

    Raises :class:`ClaudeCodeError` when the CLI fails or the run ends in an error;
    :class:`~memdir.errors.MissingExtraError` when the SDK is not installed.
    """
    try:
        from claude_agent_sdk import (
            AssistantMessage,
            ClaudeAgentOptions,
            ClaudeSDKClient,
            ClaudeSDKError,
            HookMatcher,
            PermissionResultAllow,
            PermissionResultDeny,
            ResultMessage,
            ToolResultBlock,
            ToolUseBlock,
            UserMessage,
        )
    except ImportError as exc:
        from memdir.errors import MissingExtraError

        raise MissingExtraError(
            "the Claude Code backend", "claude-agent-sdk", one_line(exc)
        ) from exc

    gate = auto_mem_can_use_tool(memory, cwd=cwd, sink=sink)
    denied: list[str] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: Any
    ) -> PermissionResultAllow | PermissionResultDeny:
        decision = await gate(name, tool_input)
        if decision.allowed:
            return PermissionResultAllow()
        denied.append(name)
        return PermissionResultDeny(message=decision.message or f"{name} is not allowed here")

    async def pre_tool_use(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
        # The CLI allows some calls without asking (reads inside the project, writes in
        # its own memory folder), and can_use_tool only hears the calls it would ask
        # about; this hook puts every call before the gate. An allowed call gets no
        # decision here, so the CLI's own rules and can_use_tool still apply.
        name = str(input_data.get("tool_name", ""))
        decision = await gate(name, input_data.get("tool_input") or {})
        if decision.allowed:
            return {}
        denied.append(name)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": decision.message or f"{name} is not allowed here",
            }
        }

    options = ClaudeAgentOptions(
        cli_path=cli_path,
        cwd=cwd,
        env=fork_environment(env, thinking_display=thinking_display),
        resume=session_id,
        fork_session=True,
        max_turns=max_turns,
        model=model,
        # Claude Code's own system prompt, as the session had it (the SDK's default
        # would be an empty one, and the cached prefix would be lost).
        system_prompt={"type": "preset", "preset": "claude_code"},
        permission_mode="default",
        can_use_tool=can_use_tool,
        hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[pre_tool_use])]},
        disallowed_tools=list(disallowed_tools),
        settings=json.dumps(_ask_before_memory_writes(memory)),
        extra_args={
            "no-session-persistence": None,
            # With the variable of fork_environment: display "omitted" as the session
            # had it (the flag alone would make the CLI ask for "updates" again).
            **({"thinking-display": "omitted"} if thinking_display == "omitted" else {}),
        },
    )
    calls: dict[str, str] = {}
    written: list[str] = []
    result: ResultMessage | None = None
    fork_model: str | None = None
    try:
        async with asyncio.timeout(FORK_TIMEOUT), ClaudeSDKClient(options) as client:
            await client.query(prompt)
            async for message in client.receive_response():
                if isinstance(message, AssistantMessage):
                    fork_model = message.model or fork_model
                    for block in message.content:
                        if isinstance(block, ToolUseBlock) and block.name in _WRITING_TOOLS:
                            path = block.input.get("file_path")
                            if isinstance(path, str):
                                calls[block.id] = path
                elif isinstance(message, UserMessage) and isinstance(message.content, list):
                    written.extend(
                        calls[block.tool_use_id]
                        for block in message.content
                        if isinstance(block, ToolResultBlock)
                        and block.tool_use_id in calls
                        and not block.is_error
                    )
                elif isinstance(message, ResultMessage):
                    result = message
    except ClaudeSDKError as exc:
        raise ClaudeCodeError(f"Claude Code failed: {one_line(exc)}") from exc
    except TimeoutError as exc:
        raise ClaudeCodeError(f"Claude Code did not finish within {FORK_TIMEOUT:g}s") from exc
    if result is None:
        raise ClaudeCodeError("Claude Code ended without a result")
    # Reaching max_turns ends the run normally (DESIGN §4.10).
    if result.is_error and result.subtype != "error_max_turns":
        raise ClaudeCodeError(
            f"Claude Code's run ended in an error ({result.subtype}): "
            f"{' '.join((result.result or '').split())}"
        )
    return ClaudeCodeRun(
        written=tuple(dict.fromkeys(written)),
        denied=tuple(denied),
        usage=dict(result.usage or {}),
        turns=result.num_turns,
        model=fork_model,
    )


async def extract_through_claude_code(
    transcript: Transcript,
    memory: MemoryDir,
    *,
    cli_path: str,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    max_turns: int = MAX_TURNS,
    sink: Sink | None = None,
) -> TranscriptReport:
    """Save memories from the messages of ``transcript`` since its cursor, through the
    Claude Code at ``cli_path`` (run with ``env``, default this process's, in ``cwd``,
    default the session's): one fork covering them all, then the cursor moves to the
    last message. A failed fork leaves the cursor, so the messages are tried again next
    time; the report counts it in ``errors`` with the reason.

    Runs on one memory folder take turns with each other and with memdir's other runs
    (the same lock as :func:`memdir._cli._run.extract_transcript`): each reads the cursor
    and the memory files and writes them back, and two at once would miss each other's.
    """
    await asyncio.to_thread(memory.ensure)
    lock = memory.lock(RUN_LOCK, timeout=RUN_LOCK_TIMEOUT)
    await asyncio.to_thread(lock.__enter__)  # waiting for another run: off the loop
    try:
        return await _extract_locked(
            transcript, memory, cli_path=cli_path, cwd=cwd, env=env, max_turns=max_turns, sink=sink
        )
    finally:
        lock.__exit__(None, None, None)


async def _extract_locked(
    transcript: Transcript,
    memory: MemoryDir,
    *,
    cli_path: str,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    max_turns: int = MAX_TURNS,
    sink: Sink | None = None,
) -> TranscriptReport:
    """:func:`extract_through_claude_code`, its lock held."""
    states = StateFile(memory)
    session = session_of(transcript)
    saved = states.get(session)
    transcript = await caught_up(transcript, saved.cursor)
    messages = transcript.messages
    start = resume_index(messages, saved.cursor)
    ends = [e for e in completed_turn_ends(messages) if e >= start]
    report = new_report(
        transcript,
        session,
        memory,
        ends,
        host_request="the session itself, resumed as a fork in Claude Code",
    )
    if not ends:
        return report
    snapshot = messages[: ends[-1] + 1]
    workdir = cwd or transcript.cwd or os.getcwd()
    new = snapshot[start:]
    if wrote_memory(new, memory.is_memory_path, memory_dir=memory, cwd=workdir):
        # The session's agent saved memory itself: that turn is covered (DESIGN §4.2).
        states.put(session, SessionState(cursor=snapshot[-1].uuid, covered_at=time.time()))
        return report
    if transcript.session_id is None:
        raise ClaudeCodeError("the transcript names no session for Claude Code to resume")
    host = _host_request(transcript.path)
    memory.ensure()
    # The CLI writes the files itself: what existed before tells a new memory from a
    # changed one in the provenance recorded after the run.
    existed = await asyncio.to_thread(_memory_files, memory)
    started = time.monotonic()
    try:
        run = await run_fork(
            session_id=transcript.session_id,
            prompt=_extraction_prompt(memory, len(model_visible(new))),
            memory=memory,
            cwd=workdir,
            cli_path=cli_path,
            env=os.environ if env is None else env,
            model=host.model,
            disallowed_tools=host.missing_tools,
            thinking_display=host.thinking_display,
            max_turns=max_turns,
            sink=sink,
        )
    except MemdirError as exc:
        report.errors += 1
        report.error_reasons.append(one_line(exc))
        report.errors_detail.append({"kind": "model", "status": None, "message": one_line(exc)})
        return report
    elapsed = time.monotonic() - started
    report.runs = 1
    report.modes.append("claude-code")
    report.plans.append(
        f"forked the session in Claude Code ({run.model or 'its default model'}, "
        f"{run.turns} request(s), {elapsed:.1f}s)"
        + (f"; the gate refused {', '.join(run.denied)}" if run.denied else "")
    )
    usage = run.usage
    report.input_tokens = int(usage.get("input_tokens") or 0)
    report.output_tokens = int(usage.get("output_tokens") or 0)
    report.cache_read_input_tokens = int(usage.get("cache_read_input_tokens") or 0)
    report.cache_creation_input_tokens = int(usage.get("cache_creation_input_tokens") or 0)
    memories = [p for p in run.written if Path(p).name != "MEMORY.md"]
    await asyncio.to_thread(_index_written, memory, workdir, memories)
    report.memories_saved = len(memories)
    report.saved_paths = memories
    await asyncio.to_thread(
        _record_written,
        memory,
        [os.path.join(workdir, p) for p in memories],
        existed,
        session=transcript.session_id,
        messages=[m.uuid for m in model_visible(new) if m.uuid],
    )
    states.put(session, SessionState(cursor=snapshot[-1].uuid, covered_at=time.time()))
    return report
