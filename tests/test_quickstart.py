"""The README's quickstart: ``examples/quickstart.py``, run as the README says, against
FakeAnthropicServer, saves memories; and the README shows that file, not a copy of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from memdir.messages import Message, ToolUseBlock
from memdir.store import parse_memory_file
from memdir.testing import FakeAnthropicServer

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "quickstart.py"
README = ROOT / "README.md"
SECTION = "## Use it from Python"
COMMAND = "python examples/quickstart.py"

MEMORY_FILE = "---\nname: {name}\ndescription: {description}\ntype: user\n---\n\n{body}\n"
USER_LINES = "I'm Ana, I lead the data platform team.\n\nWhat time is it?\n"


def readme_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def readme_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", readme_section(), flags=re.DOTALL)
    assert len(blocks) == 1, "the section shows one Python block"
    return str(blocks[0])


def scripted(memory: Path) -> Any:
    """The host agent's answers (one tool call for the time), and the memory agent's:
    one memory and its index line for each run, whatever the run's way."""
    runs: list[str] = []

    def handler(body: dict[str, Any]) -> Message | str:
        sent = json.dumps(body["messages"])
        last = body["messages"][-1]["content"]
        is_results = isinstance(last, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last
        )
        if "# Memory update" in sent:  # memdir's request: its prompt
            if is_results:
                return "Saved."
            name = f"note_{len(runs)}.md"
            runs.append(name)
            note = MEMORY_FILE.format(
                name=f"Note {len(runs)}",
                description="Ana leads the data platform team",
                body="Ana leads the data platform team.",
            )
            index = "".join(f"- [{n}]({n}) — about Ana\n" for n in runs)
            return Message(
                role="assistant",
                content=(
                    ToolUseBlock(
                        id=f"w{len(runs)}",
                        name="Write",
                        input={"file_path": str(memory / name), "content": note},
                    ),
                    ToolUseBlock(
                        id=f"i{len(runs)}",
                        name="Write",
                        input={"file_path": str(memory / "MEMORY.md"), "content": index},
                    ),
                ),
            )
        if is_results:
            return "It is the time the tool said."
        if "What time" in json.dumps(last):
            return Message(
                role="assistant",
                content=(ToolUseBlock(id="toolu_time", name="current_time", input={}),),
            )
        return "Nice to meet you, Ana."

    return handler


def quickstart_env(base_url: str) -> dict[str, str]:
    """This process's environment, pointed at the fake server and at nothing else."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy")
        and not k.startswith(("ANTHROPIC_", "OPENAI_", "MEMDIR_", "CLAUDE_"))
    }
    env.update(
        ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="test", NO_PROXY="127.0.0.1,localhost"
    )
    return env


def test_the_quickstart_runs_as_the_readme_says_and_saves_memories(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    assert COMMAND in readme_section()
    with FakeAnthropicServer(handler=scripted(memory)) as server:
        done = subprocess.run(
            [sys.executable, *COMMAND.split()[1:], str(memory)],
            cwd=ROOT,
            env=quickstart_env(server.base_url),
            input=USER_LINES,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        bodies = [r.body for r in server.requests]
        server.assert_no_errors()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Nice to meet you, Ana." in out
    assert "It is the time the tool said." in out
    # The tool call went round: its result reached the next request.
    assert any("toolu_time" in json.dumps(b["messages"][-1]) for b in bodies)
    # Every turn was remembered: each run saved a memory, with its index line.
    saved = sorted(p.name for p in memory.glob("note_*.md"))
    assert saved, out + done.stderr
    index = (memory / "MEMORY.md").read_text()
    for name in saved:
        parsed = parse_memory_file((memory / name).read_text())
        assert parsed.description == "Ana leads the data platform team"
        assert not parsed.malformed
        assert f"]({name})" in index
        assert f"remembered: {name} — Ana leads the data platform team" in out
    assert "Saved 1 memory" in out  # the notice, printed by notify=print
    # memdir's own requests carried the whole conversation, tool call and result included.
    memdir_bodies = [b for b in bodies if "# Memory update" in json.dumps(b["messages"])]
    assert any("current_time" in json.dumps(b["messages"]) for b in memdir_bodies)


def test_the_readme_shows_the_quickstart_file_itself() -> None:
    snippet = readme_snippet()
    source = EXAMPLE.read_text(encoding="utf-8")
    # The file whole, or a stretch of its lines: nothing that could drift apart.
    assert snippet.strip()
    assert snippet.endswith("\n")
    assert snippet == source or f"\n{snippet}" in source, (
        "README.md's 'Use it from Python' snippet must be examples/quickstart.py's own text"
    )
    for essential in ("asyncio.run(main(", "MemoryExtractor(", "CacheSafeParams(", "on_turn_end("):
        assert essential in snippet
    assert "await extractor.drain()" in snippet
    # A script that runs: a top-level await would not even compile.
    compile(source, str(EXAMPLE), "exec")
