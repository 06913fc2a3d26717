"""The user layer, and moving a memory between scopes.

A project's memory directory holds what is true of the project; some memories are about the
person instead (their role, their preferences, how they want work done) and are as true in
the next repository. The user layer is one more memory directory, for the person, that
every project loads beside its own: ``<Claude config home>/memdir-user/`` by default,
``$MEMDIR_USER_DIR`` to put it elsewhere. Where the two disagree, the project's memory
wins: it is the more specific.

:func:`move_memory` moves one memory file and its index line from one directory's index
to another's (project to user or team: a promotion; back: a demotion), holding both
indexes' locks. A memory that holds something the secret guard flags never moves into
the user layer or the team folder: those are read in every project, or by other people.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from memdir._claude_settings import claude_config_home, home_dir
from memdir.errors import StoreError
from memdir.store._atomic import atomic_write, file_lock
from memdir.store._entrypoint import ENTRYPOINT_NAME
from memdir.store._memory_dir import MemoryDir
from memdir.store._repair import _pointer_line
from memdir.store._secrets import scan_secrets
from memdir.store._trash import points_at, split_lines

__all__ = [
    "MEMDIR_USER_DIR_ENV",
    "USER_LAYER_DIR_NAME",
    "move_memory",
    "resolve_user_layer",
    "user_memory_dir",
]

MEMDIR_USER_DIR_ENV = "MEMDIR_USER_DIR"
"""The environment variable that puts the user layer somewhere else."""

USER_LAYER_DIR_NAME = "memdir-user"
"""The user layer's folder in Claude Code's configuration home."""

# ``[Title](link)`` in an index line: the link is group 2.
_LINK = re.compile(r"(\[[^\]]*\]\()([^)\s]+)(\))")


def user_memory_dir(env: Mapping[str, str] | None = None) -> MemoryDir:
    """The user layer: ``$MEMDIR_USER_DIR`` (a leading ``~`` is ``env``'s home), else
    ``memdir-user`` in Claude Code's configuration home (``$CLAUDE_CONFIG_DIR`` or
    ``~/.claude``), where it sits beside the user's own ``CLAUDE.md`` that imports it."""
    env = os.environ if env is None else env
    configured = env.get(MEMDIR_USER_DIR_ENV)
    if configured:
        if configured == "~" or configured.startswith("~/"):
            configured = home_dir(env) + configured[1:]
        return MemoryDir(configured)
    return MemoryDir(claude_config_home(env) / USER_LAYER_DIR_NAME)


def resolve_user_layer(
    value: bool | str | os.PathLike[str] | MemoryDir | None,
    env: Mapping[str, str] | None = None,
) -> MemoryDir | None:
    """The user layer a setting names: ``True`` the default (:func:`user_memory_dir`),
    a path or :class:`MemoryDir` that folder, ``False``/``None`` no layer."""
    if value is None or value is False:
        return None
    if value is True:
        return user_memory_dir(env)
    return value if isinstance(value, MemoryDir) else MemoryDir(value)


@contextlib.contextmanager
def _both_locks(first: Path, second: Path) -> Iterator[None]:
    """Hold the locks of two indexes, always in path order, so that a move one way and a
    move the other way at the same time never wait for each other in a circle."""
    with contextlib.ExitStack() as stack:
        for index in sorted({first, second}, key=str):
            stack.enter_context(file_lock(index))
        yield


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _relinked(line: bytes, index_dir: Path, source: Path, link: str) -> bytes:
    """``line`` with its link to ``source`` made ``link``."""
    text = line.decode("utf-8", errors="surrogateescape")

    def swap(match: re.Match[str]) -> str:
        target = match.group(2).strip("<>").split("#", 1)[0]
        resolved = target if os.path.isabs(target) else os.path.join(index_dir, target)
        if os.path.normpath(resolved) != os.path.normpath(source):
            return match.group(0)
        return f"{match.group(1)}{link}{match.group(3)}"

    return _LINK.sub(swap, text).encode("utf-8", errors="surrogateescape")


def move_memory(
    source: Path,
    *,
    from_index: Path,
    to_dir: Path,
    shared: bool,
) -> Path:
    """Move the memory file ``source`` into the folder ``to_dir``, and its line from the
    index ``from_index`` into ``to_dir``'s ``MEMORY.md``; return the new path.

    Both indexes are locked while it runs. The memory keeps its file name; a memory of
    that name already in ``to_dir`` stops the move. ``shared``: the destination is read
    beyond this project (the user layer, the team folder), so a memory the secret guard
    flags is refused. The line keeps its title and hook with the link made relative to the
    new index; a memory no line listed gets one made from its frontmatter. The order of the
    steps (new file, new line, old line out, old file out) means a crash leaves the memory
    in both places at worst, never in neither.

    Raises :class:`~memdir.errors.StoreError`, with nothing moved, when the file cannot be
    read, already exists there, or holds a secret that may not go there.
    """
    target = to_dir / source.name
    to_index = to_dir / ENTRYPOINT_NAME
    with _both_locks(from_index, to_index):
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise StoreError(f"cannot read {source}: {exc.strerror or exc}") from exc
        if os.path.lexists(target):
            raise StoreError(f"{target} already exists: not overwriting it")
        if shared:
            findings = scan_secrets(data.decode("utf-8", errors="replace"))
            if findings:
                kinds = ", ".join(sorted({f.rule_id for f in findings}))
                raise StoreError(
                    f"{source.name} holds a credential ({kinds}); it stays where it is, "
                    f"since {to_dir} is read beyond this project"
                )
        old_lines = split_lines(_read(from_index))
        ours = [line for line in old_lines if points_at(line, from_index.parent, source)]
        link = posixpath.join(*Path(os.path.relpath(target, to_dir)).parts)
        if ours:
            moved = [_relinked(line, from_index.parent, source, link) for line in ours]
            moved = [line if line.endswith(b"\n") else line + b"\n" for line in moved]
        else:
            head = data.decode("utf-8", errors="replace")
            moved = [(_pointer_line(source, link, head) + "\n").encode("utf-8")]
        new_index = _read(to_index)
        if new_index and not new_index.endswith(b"\n"):
            new_index += b"\n"
        atomic_write(target, data)
        atomic_write(to_index, new_index + b"".join(moved))
        if ours:
            atomic_write(from_index, b"".join(line for line in old_lines if line not in ours))
        source.unlink(missing_ok=True)
    return target
