"""The memory agent and the user layer: with the layer on, a memory about the person is
saved there (stamped and indexed), the project's stay in the project, and no credential
gets in; memdir's hosts load the layer's index before the project's."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.permissions import auto_mem_can_use_tool
from memdir.recall import memory_prompt, memory_reminder
from memdir.store import MemoryDir, parse_memory_file
from memdir.testing import FunctionModel

ROLE = "---\nname: role\ndescription: Ana leads the data platform team\ntype: user\n---\nAna.\n"
DEPLOY = "---\nname: deploy\ndescription: deploys go out on Tuesdays\ntype: project\n---\nTue.\n"
TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"
_LAYER = re.compile(r"User layer: `([^`]+)`")


def _prompt_text(request: ModelRequest) -> str:
    return "\n".join(m.text for m in request.messages)


def router(memory: Path, role_text: str = ROLE) -> Any:
    """A memory agent that puts the person's role in the user layer when its prompt names
    one (else in the project), and the deploy day in the project."""

    def answer(request: ModelRequest) -> Message | str:
        if request.messages[-1].is_tool_result:
            return "Nothing more to save."
        found = _LAYER.search(_prompt_text(request))
        home = Path(found.group(1)) if found else memory
        uses = (
            ToolUseBlock(
                id="t0",
                name="Write",
                input={"file_path": str(home / "user_role.md"), "content": role_text},
            ),
            ToolUseBlock(
                id="t1",
                name="Write",
                input={"file_path": str(memory / "project_deploy.md"), "content": DEPLOY},
            ),
        )
        return Message(role="assistant", content=uses)

    return answer


def _extract(tmp_path: Path, layer: Path | None, role_text: str = ROLE) -> FunctionModel:
    memory = tmp_path / "memory"
    model = FunctionModel(router(memory, role_text))
    config = ExtractConfig(user_layer=layer if layer is not None else False)
    extractor = MemoryExtractor(memory, model, config)
    turn = TurnContext(
        messages=(
            Message.user("I lead the data platform team; deploys go out on Tuesdays."),
            Message.assistant("Noted."),
        ),
        cwd=str(tmp_path),
    )

    async def main() -> None:
        extractor.on_turn_end(turn)
        await extractor.drain()

    asyncio.run(main())
    return model


def test_with_the_layer_on_a_memory_about_the_person_goes_there(tmp_path: Path) -> None:
    layer = tmp_path / "user-layer"
    model = _extract(tmp_path, layer)
    memory = tmp_path / "memory"
    assert f"User layer: `{layer}`" in _prompt_text(model.requests[0])
    saved = layer / "user_role.md"
    assert saved.is_file()
    assert parse_memory_file(saved.read_text(encoding="utf-8")).type == "user"
    assert "](user_role.md)" in (layer / "MEMORY.md").read_text(encoding="utf-8")
    assert not (memory / "user_role.md").exists()
    assert (memory / "project_deploy.md").is_file()
    assert "](project_deploy.md)" in (memory / "MEMORY.md").read_text(encoding="utf-8")


def test_with_the_layer_off_everything_stays_in_the_project(tmp_path: Path) -> None:
    model = _extract(tmp_path, None)
    assert "User layer" not in _prompt_text(model.requests[0])
    assert (tmp_path / "memory" / "user_role.md").is_file()
    assert not (tmp_path / "user-layer").exists()


def test_a_credential_never_reaches_the_user_layer(tmp_path: Path) -> None:
    layer = tmp_path / "user-layer"
    _extract(tmp_path, layer, role_text=ROLE + f"Her token is {TOKEN}.\n")
    assert not (layer / "user_role.md").exists()
    assert (tmp_path / "memory" / "project_deploy.md").is_file()


def test_the_gate_allows_the_layer_only_when_on_and_never_a_secret(tmp_path: Path) -> None:
    memory, layer = MemoryDir(tmp_path / "memory"), MemoryDir(tmp_path / "user-layer")
    target = {"file_path": str(layer.root / "user_role.md"), "content": ROLE}
    secret = {**target, "content": ROLE + TOKEN}

    async def decide(gate: Any, tool_input: dict[str, str]) -> bool:
        return bool((await gate("Write", tool_input)).allowed)

    async def refusal(gate: Any, tool_input: dict[str, str]) -> str:
        return str((await gate("Write", tool_input)).message)

    off = auto_mem_can_use_tool(memory, cwd=tmp_path)
    on = auto_mem_can_use_tool(memory, cwd=tmp_path, user_dir=layer, allow_private_secrets=True)
    assert not asyncio.run(decide(off, target))
    assert asyncio.run(decide(on, target))
    assert not asyncio.run(decide(on, secret))
    elsewhere = {"file_path": str(tmp_path / "notes.md"), "content": ROLE}
    assert str(layer.root) in asyncio.run(refusal(on, elsewhere))


def test_hosts_load_the_layer_first_and_the_project_wins(tmp_path: Path) -> None:
    memory, layer = MemoryDir(tmp_path / "memory"), MemoryDir(tmp_path / "user-layer")
    for where, line in ((memory, "- [Npm](npm.md) — npm here"), (layer, "- [Pnpm](p.md) — pnpm")):
        where.ensure()
        where.entrypoint.write_text(line + "\n", encoding="utf-8")
    reminder = memory_reminder(memory, user_dir=layer)
    assert reminder.index("pnpm") < reminder.index("npm here")
    assert "the project's memory wins" in reminder
    assert memory_reminder(memory) == memory_reminder(memory, user_dir=None)
    assert "pnpm" not in memory_reminder(memory)
    prompt = memory_prompt(memory, user_dir=layer)
    assert f"`{layer.root}/`" in prompt
    assert "follow the project memory" in prompt
    assert str(layer.root) not in memory_prompt(memory)
