"""The memory directory of a command that only works on memory already saved.

``extract``, ``watch`` and the hook create the memory directory on purpose. The others
(``ls``, ``show``, ``forget``, ``recall``, ``prompt``, ``dream``) have nothing to do in a
folder that does not exist, and a mistyped ``--memory-dir`` must not be created, or
reported empty, as if it were the real one.
"""

from __future__ import annotations

from pathlib import Path

from memdir._cli._common import choose_memory_dir, fail
from memdir.store import MEMDIR_DIR_ENV, MemoryDir


def existing_memory_dir(
    option: Path | None, project: str | None, *, write: bool = False
) -> MemoryDir:
    """:func:`~memdir._cli._common.choose_memory_dir`, and stop with one line (exit 2)
    when the folder does not exist: nothing is created."""
    memory = choose_memory_dir(option, project, write=write)
    if not memory.root.is_dir():
        fail(
            f"no memory directory at {memory.root}: it does not exist (check --memory-dir "
            f"or ${MEMDIR_DIR_ENV}; extract, watch and the hook create it when they save)",
            kind="memory_dir",
        )
    return memory
