"""A run's estimate priced with what the run then did (``estimated_cost_as_run``).

Before a run the planner cannot know whether the model saves, or reads a memory before
updating it; with the run's own requests and output taken as they came, what is left
of the gap to the bill is the planner's view of the request and the cache. These runs
go over HTTP to the fake Anthropic server, which bills by the documented cache rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memdir.extract._run import _shared_tokens
from memdir.messages import Message, ToolUseBlock
from tests.extract.test_planner import WRITE_TOOLS, served_runs

SYSTEM = "You are a coding agent. " * 300

# A memory long enough that reading it back is most of what a second request adds.
LONG_MEMORY = (
    "---\ndescription: how the ingest job batches and retries its writes\n---\n\n"
    + "The ingest job batches writes by partition and flushes every second.\n" * 90
)


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]["content"]
    return last if isinstance(last, list) else [{"type": "text", "text": last}]


def test_an_update_that_reads_its_memory_first_is_priced_with_what_the_read_added(
    tmp_path: Path,
) -> None:
    """The second run reads the memory the first wrote, then edits it: two requests, the
    second carrying the file's text as a tool result. Counted by its text alone (tool
    calls and results left out), what a later request adds was near nothing, and such a
    run was priced far under its bill."""
    calls = iter(
        [
            ToolUseBlock(
                id="toolu_w",
                name="Write",
                input={"file_path": "project_ingest.md", "content": LONG_MEMORY},
            ),
            ToolUseBlock(id="toolu_r", name="Read", input={"file_path": "project_ingest.md"}),
            ToolUseBlock(
                id="toolu_e",
                name="Edit",
                input={
                    "file_path": "project_ingest.md",
                    "old_string": "how the ingest job batches",
                    "new_string": "how the ingest job batches (per partition)",
                },
            ),
        ]
    )

    def reply(body: dict[str, Any]) -> Message | str:
        blocks = _blocks(body)
        memory_run = any(b.get("type") == "tool_result" for b in blocks) or str(
            blocks[0].get("text", "")
        ).startswith("# Memory update")
        if not memory_run:
            return "Batch by partition."
        call = next(calls, None)
        return Message(role="assistant", content=(call,)) if call else "Nothing to save."

    runs, _ = served_runs(tmp_path, system=SYSTEM, tools=WRITE_TOOLS, turns=3, reply=reply)
    update = runs[1]
    assert update["turn_count"] == 2
    assert update["memories_saved"] == 1
    billed = update["billed_cost"]
    assert abs(update["estimated_cost_as_run"] - billed) <= 0.1 * billed
    # The read's result is most of what the second request added: well over what the
    # file's text costs written once.
    assert update["cache_creation_input_tokens"] > len(LONG_MEMORY) // 4
    for run in runs:
        assert abs(run["estimated_cost_as_run"] - run["billed_cost"]) <= 0.1 * run["billed_cost"]


def test_a_window_started_afresh_still_reads_the_list_of_memory_files_before_it(
    tmp_path: Path,
) -> None:
    """When the window outgrows its budget while memdir's cache lives, it starts afresh;
    the opening message before it (the list of memory files) is unchanged and has a
    breakpoint of its own, so the request reads it. Priced as if only the instructions
    were cached, such a run was estimated as writing the list again."""
    memory = tmp_path / "memory"
    memory.mkdir()
    index = []
    for n in range(15):
        name = f"reference_topic_{n}.md"
        description = f"where the team keeps the runbooks and dashboards for subsystem {n}"
        (memory / name).write_text(
            f"---\nname: topic {n}\ndescription: {description}\ntype: reference\n---\n\n"
            f"Runbooks for subsystem {n} live in the ops wiki.\n",
            encoding="utf-8",
        )
        index.append(f"- [topic {n}]({name}) — {description}")
    (memory / "MEMORY.md").write_text("\n".join(index) + "\n", encoding="utf-8")

    runs, _ = served_runs(tmp_path, system=SYSTEM, tools=WRITE_TOOLS, turns=10)
    afresh = [r for r in runs if r["estimate_note"] == "memdir's instructions and list cached"]
    assert afresh, [r["estimate_note"] for r in runs]
    for run in runs[1:]:
        assert run["mode"] == "standalone"
        billed = run["billed_cost"]
        assert abs(run["estimated_cost_as_run"] - billed) <= 0.1 * billed, run["estimate_note"]
        assert abs(run["estimated_cost_if_nothing_saved"] - billed) <= 0.1 * billed


def test_openai_reads_a_list_grown_at_its_end_up_to_where_it_changed() -> None:
    """OpenAI caches any prefix (in steps of 128 tokens, which the pricing applies): a
    list with one memory added at its end is read up to the addition. Anthropic reads
    only at breakpoints, so a changed opening message is read not at all."""
    before = "The memory files:\n" + "".join(f"- topic_{n}.md: runbooks\n" for n in range(60))
    after = before + "- topic_60.md: runbooks\n"
    assert _shared_tokens(before, after, "openai") == len(before) // 4
    assert _shared_tokens(before, after, "anthropic") == 0
    assert _shared_tokens(before, before, "anthropic") == len(before) // 4 + 1 + 8
