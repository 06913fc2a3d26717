"""Does Anthropic's prompt cache serve a fork of Claude Code's request that lacks the
attribution block Claude Code adds at send time? One command, with your key, settles it.

Claude Code puts ``x-anthropic-billing-header: …`` first in its system prompt when it
sends a request, and does not record it in the transcript. memdir's Stop hook forks from
the recorded request, so its system prompt lacks that block. This script:

1. runs one short ``claude -p`` session in a throwaway project (the CLI bundled with
   ``claude-agent-sdk``, or ``--claude PATH``), against the API your environment names;
2. rebuilds that session's last request from its transcript, as the hook does, and sends
   it once more with the answer and a one-line question after it, at once;
3. prints how much of that request's input the API read from its cache.

A share near the whole prefix means the provider leaves the block out of caching, and the
hook's forks ride Claude Code's cache; a share near zero means the block counts, and each
fork's first request writes a cache of its own. The two requests cost about two short
Claude Code turns.

    pip install 'memdir[anthropic]' claude-agent-sdk
    ANTHROPIC_API_KEY=... python scripts/check_claude_code_cache.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from memdir._cli._recorded import recorded_host
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import AnthropicModel, ModelRequest
from memdir.transcripts import load_transcript

PROMPT = "In one sentence: what is a prompt cache?"
QUESTION = "Reply with the single word OK."


def bundled_claude() -> Path:
    import claude_agent_sdk

    return Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


def run_session(claude: Path, root: Path) -> Path:
    """One ``claude -p`` turn in a new project; its transcript."""
    project = root / "project"
    project.mkdir()
    session = str(uuid.uuid4())
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(root / "config")}
    done = subprocess.run(
        [str(claude), "-p", PROMPT, "--session-id", session],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"claude -p failed ({done.returncode}): {done.stderr.strip()[:500]}")
    found = sorted((root / "config").glob(f"projects/*/{session}.jsonl"))
    if not found:
        raise SystemExit("claude -p wrote no transcript")
    return found[0]


async def fork_once(transcript: Path) -> dict[str, object]:
    loaded = load_transcript(transcript)
    model = AnthropicModel("claude-sonnet-5-5", base_url=os.environ.get("ANTHROPIC_BASE_URL"))
    host = recorded_host(loaded, model)
    if host.params is None:
        raise SystemExit(f"the session's request cannot be rebuilt: {host.reason}")
    params: CacheSafeParams = host.params
    answer = loaded.messages[params.wire_replaces :]
    try:
        response = await params.model.request(
            ModelRequest(
                system=params.system,
                tools=params.tools,
                messages=(*answer, Message.user(QUESTION)),
                params=params.params,
                wire_prefix=tuple(params.wire_messages),
                cache_points=(len(answer) - 1,),
            )
        )
    finally:
        await model.aclose()  # the fork's model shares this one's client
    usage = response.usage
    total = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    share = usage.cache_read_input_tokens / total if total else 0.0
    return {
        "model": params.model.name,
        "input_tokens": usage.input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "read_share": round(share, 4),
        "verdict": (
            "the attribution block is left out of caching: forks ride Claude Code's cache"
            if share >= 0.5
            else "the attribution block counts: a fork's first request writes its own cache"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", type=Path, help="the Claude Code CLI (default: bundled)")
    args = parser.parse_args()
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise SystemExit("set ANTHROPIC_API_KEY (the check sends two short requests)")
    claude = args.claude or bundled_claude()
    with tempfile.TemporaryDirectory() as tmp:
        transcript = run_session(claude, Path(tmp))
        result = asyncio.run(fork_once(transcript))
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
