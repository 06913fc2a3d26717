"""What memory holds, as the memory agent is shown it: each memory once, and a size that
stays the same however many memories the store holds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._prompts import extract_prompt_parts
from memdir.extract._standalone import estimate_tokens
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest
from memdir.store import MEMORY_TYPES, MemoryHeader
from memdir.testing import ScriptedModel

KINDS = MEMORY_TYPES
# What the new messages of every run below say: two of the store's memories by topic.
NEW = (
    Message.user("The quokka pipeline moved to Berlin, and the zebrafish dashboard is gone."),
    Message.assistant("Understood, I will keep that in mind."),
)


def topic(i: int) -> str:
    """A word that belongs to memory ``i`` alone (the two the messages name have their own)."""
    return {7: "quokka", 33: "zebrafish"}.get(i, f"topic{i:04d}")


def memory_text(i: int) -> str:
    kind = KINDS[i % len(KINDS)]
    return (
        f"---\nname: note-{i}\n"
        f"description: The {topic(i)} service runs on port {8000 + i} in the main cluster\n"
        f"metadata:\n  type: {kind}\n---\n\nThe {topic(i)} service runs on port {8000 + i}.\n"
    )


def fill(memory: Path, count: int) -> None:
    memory.mkdir(parents=True, exist_ok=True)
    pointers = []
    for i in range(count):
        path = memory / f"note_{i:04d}.md"
        path.write_text(memory_text(i))
        # Oldest first, as a store grows: the scan lists the newest first.
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
        pointers.append(f"- [Note {i}](note_{i:04d}.md) — the {topic(i)} service")
    (memory / "MEMORY.md").write_text("# Index\n\n" + "\n".join(pointers) + "\n")


HOST_MEMORY = (
    "You are the host agent.\n\n# Memory\n\nYou have a persistent file-based memory at "
    "`/somewhere/memory/`. Each memory is one file holding one fact.\n"
)
MODES = ["standalone", "fork", "fork-short"]


def run_once(memory: Path, mode: str, messages: tuple[Message, ...] = NEW) -> ModelRequest:
    model = ScriptedModel(["Nothing to save."])
    config = ExtractConfig(mode=mode.removesuffix("-short"), load_instructions=False)  # type: ignore[arg-type]
    extractor = MemoryExtractor(memory, model, config)
    # With a memory section in the host's system prompt, the fork gets the short prompt.
    system = HOST_MEMORY if mode == "fork-short" else "You are the host agent."
    params = CacheSafeParams(model=model, system=system, tools=[])

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=messages, params=params))
        await extractor.drain()

    asyncio.run(main())
    return model.requests[0]


def shown_state(request: ModelRequest, mode: str) -> str:
    """The part of the request that shows what memory holds."""
    if mode == "standalone":
        # The state message before the conversation, and any list the request adds last.
        last = request.messages[-1].text
        touched = last[last.index("## Existing") :] if "## Existing" in last else ""
        return request.messages[0].text + touched
    prompt = request.messages[-1].text
    end = "## How this run works" if "## How this run works" in prompt else "## Tools"
    return prompt[prompt.index("## Existing memory files") : prompt.index(end)]


@pytest.mark.parametrize("mode", MODES)
def test_the_state_stays_the_same_size_as_the_store_grows(tmp_path: Path, mode: str) -> None:
    sizes = {}
    states = {}
    for count in (12, 50, 150, 500):
        memory = tmp_path / f"memory-{count}"
        fill(memory, count)
        # Recently edited, so among the newest 200 files the scan lists (Claude Code's cap):
        # older ones are found with Grep, never listed.
        for i in (7, 33):
            if i < count:
                os.utime(memory / f"note_{i:04d}.md", (1_800_000_000 + i, 1_800_000_000 + i))
        request = run_once(memory, mode)
        state = shown_state(request, mode)
        sizes[count] = estimate_tokens(state)
        states[count] = state
        # The memories the new messages touch are listed, whatever the store's size, and
        # only they: a word every memory shares ("service") touches none.
        assert "note_0007.md" in state
        if count > 15:
            listed = [ln for ln in state.splitlines() if ln.startswith("- ") and "](" not in ln]
            assert len(listed) == (2 if count > 33 else 1)
        # Each memory is shown once: its pointer line in MEMORY.md is not repeated.
        assert "](note_0007.md)" not in state
        if count > 33:
            assert state.count("note_0033.md") == 1
        if count > 15:  # past ExtractConfig.memory_list_entries
            assert f"{min(count, 200)} memory files" in state
            # How to find the rest: in the fork's prompt, and in the standalone request's
            # cached system prompt (with a Grep to do it with), not in its last message.
            if mode == "standalone":
                assert "`Grep` the memory directory" in str(request.system)
                assert "Grep" in [tool["name"] for tool in request.tools]
            else:
                assert "`Grep` or `Glob` the memory directory" in state
            assert "note_0012.md" not in state  # a memory nothing new touches
    # Every memory listed below the budget...
    assert all(f"note_{i:04d}.md" in states[12] for i in range(12))
    # ...and past it the same order of size, not ~75 tokens more for each memory.
    assert sizes[500] <= 1.2 * sizes[50]
    assert sizes[150] <= 1.2 * sizes[50]
    assert sizes[500] < 1_200


def header(i: int, kind: str | None = "project", name: str | None = None) -> MemoryHeader:
    return MemoryHeader(
        filename=f"note_{i:04d}.md",
        path=Path(f"/m/note_{i:04d}.md"),
        mtime=1_700_000_000 + i,
        name=name or f"note-{i}",
        description=f"about the {topic(i)} service",
        type=kind,  # type: ignore[arg-type]
    )


def test_below_the_budget_every_memory_is_listed_once() -> None:
    headers = [header(i) for i in range(5)]
    index = "# Index\n\n" + "".join(f"- [N](note_{i:04d}.md) — hook {i}\n" for i in range(5))
    state = extract_prompt_parts(
        2, "", index_text=index, memories=headers, new_text="", list_budget=40
    ).memory
    for i in range(5):
        assert state.count(f"note_{i:04d}.md") == 1 + (i == 4)
    # The index keeps its own lines, and its last line exact, for an Edit to append after.
    assert "```markdown\n# Index\n\n[… 4 pointer lines to memory files …]\n- [N](note_0004.md)" in (
        state
    )
    assert "without its 4 pointer lines to memory files" in state
    assert "holds exactly this" not in state  # so a parser of the old form reads it first


def test_an_index_without_pointers_is_shown_whole() -> None:
    index = "# Index\n\nSee [the wiki](https://example.com/a.md) and [x](/abs/x.md).\n"
    state = extract_prompt_parts(2, "", index_text=index, memories=[header(0)]).memory
    assert "holds exactly this" in state
    assert f"```markdown\n{index}```" in state


def test_past_the_budget_the_store_is_counted_by_type() -> None:
    headers = [header(i, kind=KINDS[i % 4]) for i in range(60)] + [header(60, kind=None)]
    parts = extract_prompt_parts(
        2, "", memories=headers, new_text="Is the quokka up?", list_budget=40
    )
    assert "61 memory files: 15 user, 15 feedback, 15 project, 15 reference, 1 untyped." in (
        parts.state
    )
    assert "`Grep` or `Glob` the memory directory" in parts.state
    assert "note_0007.md" not in parts.state
    touched = parts.request[parts.request.index("## Existing memory files") :]
    assert [line.split()[2] for line in touched.splitlines() if line.startswith("- ")] == [
        "note_0007.md"
    ]
    nothing = extract_prompt_parts(2, "", memories=headers, new_text="ok", list_budget=40)
    assert "The new messages touch none of the memory files" in nothing.request


def test_past_the_budget_the_state_does_not_change_with_the_new_messages(
    tmp_path: Path,
) -> None:
    fill(tmp_path, 60)
    other = (Message.user("What about the topic0012 and topic0040 services?"), NEW[1])
    first = run_once(tmp_path, "standalone")
    second = run_once(tmp_path, "standalone", messages=other)
    # The state message, before the conversation window, is the same bytes: cached.
    assert first.messages[0].text == second.messages[0].text
    assert "note_0012.md" in second.messages[-1].text
    assert "note_0012.md" not in first.messages[-1].text


def test_a_file_the_new_messages_name_comes_first() -> None:
    headers = [header(i) for i in range(100)]
    # Every memory shares "service"; the one named by its file comes before the budget cut.
    new = "The service in note_0099.md, and the service of topic0003, changed."
    request = extract_prompt_parts(2, "", memories=headers, new_text=new, list_budget=2).request
    listed = [line for line in request.splitlines() if line.startswith("- ")]
    assert len(listed) == 2
    assert {line.split()[2] for line in listed} == {"note_0099.md", "note_0003.md"}


def test_team_index_pointers_are_named_from_the_team_directory() -> None:
    team = MemoryHeader(
        filename="team/shared.md",
        path=Path("/m/team/shared.md"),
        mtime=1_700_000_000,
        name="shared",
        description="a team fact",
        type="project",
    )
    state = extract_prompt_parts(
        2,
        "",
        team=True,
        memory_dir="/m",
        index_text="- [P](note_0000.md) — p\n- [Other](other.md) — o\n",
        team_index_text="- [S](shared.md) — s\n- [Other](other.md) — o\n",
        memories=[header(0), team],
        list_budget=40,
    ).memory
    assert state.count("note_0000.md") == 1
    assert state.count("team/shared.md") == 1
    assert "](shared.md)" not in state


def test_memories_that_share_only_a_word_with_the_best_match_are_left_out() -> None:
    # Memory 1 is about what the new messages are about; memories 2 to 9 share one
    # word with them ("deploys"), each rarer than "service" but far from the subject.
    headers = [
        MemoryHeader(
            filename=f"note_{i:04d}.md",
            path=Path(f"/m/note_{i:04d}.md"),
            mtime=1_700_000_000.0 + i,
            description=description,
            type="project",
            name=None,
        )
        for i, description in enumerate(
            ["the billing service bills monthly"]
            + ["the quokka pipeline deploys on Thursdays behind the blue canary gate"]
            + [f"the topic{i:04d} service deploys nightly" for i in range(2, 10)]
            + [f"the topic{i:04d} service is fine" for i in range(10, 60)]
        )
    ]
    new = "Moving the quokka pipeline off the blue canary gate; it deploys on Fridays now."
    request = extract_prompt_parts(2, "", memories=headers, new_text=new, list_budget=15).request
    listed = [line.split()[2] for line in request.splitlines() if line.startswith("- ")]
    assert listed == ["note_0001.md"]


def test_memdir_lists_each_memory_with_its_day_not_its_millisecond() -> None:
    headers = [header(i) for i in range(3)]
    listing = extract_prompt_parts(2, "", memories=headers, list_budget=15).listing
    lines = [line for line in listing.splitlines() if line.startswith("- ")]
    assert len(lines) == 3
    assert all(" (2023-11-14): " in line for line in lines), lines
    assert "T" not in "".join(line.split("(")[1].split(")")[0] for line in lines)
