"""How long Claude Code waits for memdir's Stop hook, measured by Claude Code itself.

Each round runs one ``claude -p`` session (the real CLI bundled with ``claude-agent-sdk``,
offline against ``FakeAnthropicServer``) per side, the sides in turn, and reads the hook's
``durationMs`` from the ``stop_hook_summary`` line the CLI writes to the transcript:

- ``memdir_hook``: ``memdir hook claude-code`` as shipped (the extraction, with the
  offline model, goes on in a detached process);
- ``empty_hook``: a hook that does nothing (``true``): what any hook costs the CLI;
- ``waiting_extract``: ``memdir extract`` run inside the hook until it is done, as a hook
  that waits for its extraction would.

Then the PreToolUse hook that applies feedback memories' rules (``memdir hook
pre-tool-use``), which Claude Code waits for before every Bash, Edit and Write: each call
starts the command through a shell with a PreToolUse input on stdin and waits for it to
exit, as Claude Code runs a command hook, against a memory folder of 200 feedback memories
with one rule each. Sides: the empty hook, a call no rule stops (every rule checked), a
call one rule denies (the answer written and the firing recorded), the first as installed
(no ``--memory-dir``: the folder found as Claude Code finds it), and the first call after
every memory changed (all 200 read again). Median of ``--calls`` calls each.

    python bench/hook_exit.py [--sessions 10] [--calls 50] [--only stop|pre-tool-use]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.claude_code._cli import ClaudeCli, find_claude_binary

PROMPT = "I'm Ana, I lead the data platform team. Always use polars, never pandas."
PYTHON = shlex.quote(sys.executable)
SIDES = {
    "memdir_hook": f"{PYTHON} -m memdir hook claude-code --model offline",
    "empty_hook": "true",
    # The hook's input names the transcript; a shell reads it from stdin.
    "waiting_extract": (
        f'{PYTHON} -c \'import json,subprocess,sys; p=json.load(sys.stdin)["transcript_path"]; '
        f'subprocess.run([sys.executable,"-m","memdir","extract","--quiet",'
        f'"--model","offline",p])\''
    ),
}


def hook_ms(transcript: Path) -> float:
    for line in transcript.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("subtype") == "stop_hook_summary":
            return float(entry["hookInfos"][0]["durationMs"])
    raise RuntimeError(f"no stop_hook_summary in {transcript}")


RULES = 200
RULE_HOOK = f"{PYTHON} -m memdir hook pre-tool-use --memory-dir "


def rule_memories(root: Path, count: int = RULES) -> None:
    """``count`` feedback memories, each with one Bash rule; the last forbids npm."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        program = "npm" if n == count - 1 else f"tool{n}"
        (root / f"feedback_{n}.md").write_text(
            f"---\nname: no {program}\ndescription: never run {program} here\n"
            f"type: feedback\nrule: {{tool: Bash, match: {program} install, action: deny}}\n"
            f"---\nNever run {program} here.\n",
            encoding="utf-8",
        )


def hook_call_ms(command: str, command_line: str) -> float:
    payload = json.dumps(
        {
            "session_id": "bench",
            "transcript_path": "/dev/null",
            "cwd": "/tmp",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command_line},
            "tool_use_id": "toolu_bench",
        }
    )
    started = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", command], input=payload, text=True, capture_output=True)
    return (time.perf_counter() - started) * 1000


def pre_tool_use(calls: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory"
        rule_memories(memory)
        hook = RULE_HOOK + shlex.quote(str(memory))
        hook_call_ms(hook, "ls")  # the first sync writes the book
        sides = {
            "empty_hook": ("true", "ls"),
            "rules_allow": (hook, "pnpm install && pnpm test"),
            "rules_deny": (hook, "cd web && npm install"),
            # As installed: no --memory-dir, the folder found as Claude Code finds it.
            "rules_allow_found_dir": (
                f"MEMDIR_DIR={shlex.quote(str(memory))} {RULE_HOOK.split(' --memory-dir')[0]}",
                "pnpm install && pnpm test",
            ),
        }
        durations: dict[str, list[float]] = {side: [] for side in sides}
        durations["rules_resync"] = []
        for round_ in range(calls):
            for side, (command, line) in sides.items():
                durations[side].append(hook_call_ms(command, line))
            if round_ < max(3, calls // 10):
                for path in memory.glob("*.md"):
                    os.utime(path)  # every memory changed: all read again
                durations["rules_resync"].append(hook_call_ms(hook, "ls"))
        medians = {side: statistics.median(v) for side, v in durations.items()}
        return {
            "rules": RULES,
            "calls_per_side": calls,
            "hook_ms": {
                side: {"median": round(medians[side], 1), "max": round(max(v), 1)}
                for side, v in durations.items()
            },
            "rules_allow_over_empty_hook_ms": round(
                medians["rules_allow"] - medians["empty_hook"], 1
            ),
            "firings_recorded": sum(
                1 for _ in (memory / ".memdir" / "rule_firings.jsonl").open(encoding="utf-8")
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", choices=["stop", "pre-tool-use"])
    args = parser.parse_args()
    if args.only == "pre-tool-use":
        print(
            json.dumps({"bench": "hook_exit", "pre_tool_use": pre_tool_use(args.calls)}, indent=2)
        )
        return
    binary, version = find_claude_binary()
    durations: dict[str, list[float]] = {side: [] for side in SIDES}
    session_s: dict[str, list[float]] = {side: [] for side in SIDES}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.sessions):
            order = list(SIDES)
            order = order[round_ % len(order) :] + order[: round_ % len(order)]
            for side in order:
                cli = ClaudeCli(binary, version, Path(tmp) / f"{side}-{round_}")
                settings = {
                    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": SIDES[side]}]}]}
                }
                run = cli.run(PROMPT, replies=["Noted."], settings=settings)
                assert run.transcript is not None
                durations[side].append(hook_ms(run.transcript))
                session_s[side].append(run.elapsed)
    medians = {side: statistics.median(values) for side, values in durations.items()}
    print(
        json.dumps(
            {
                "bench": "hook_exit",
                "cli": version,
                "sessions_per_side": args.sessions,
                "hook_ms": {
                    side: {
                        "median": round(medians[side], 1),
                        "max": round(max(durations[side]), 1),
                        "all": durations[side],
                    }
                    for side in SIDES
                },
                "session_s_median": {
                    side: round(statistics.median(v), 2) for side, v in session_s.items()
                },
                "memdir_hook_over_empty_hook_ms": round(
                    medians["memdir_hook"] - medians["empty_hook"], 1
                ),
                "waiting_extract_to_memdir_hook": round(
                    medians["waiting_extract"] / medians["memdir_hook"], 2
                ),
                **({} if args.only == "stop" else {"pre_tool_use": pre_tool_use(args.calls)}),
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
