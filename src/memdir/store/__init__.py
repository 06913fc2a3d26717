"""The memory directory: where memories live, what they look like, and how they are kept safe.

- :class:`MemoryDir` — one directory, its ``MEMORY.md`` index and ``team/`` folder, with
  symlink-safe containment checks.
- :func:`default_memory_dir` — the folder Claude Code uses for a project, so both tools
  share one memory; :func:`user_memory_dir` — the user layer, memories about the person
  that every project loads, and :func:`move_memory` to promote a memory there (or to the
  team) and back.
- memory files: :func:`parse_memory_file` / :func:`format_memory_file` (YAML frontmatter,
  in Claude Code's current layout or the 2.1.88 one), :func:`stamp_memory_file` (what
  Claude Code does to a memory file it writes), :func:`memory_slug`,
  :func:`type_of_file_name` (the type a file's name starts with), and the ``[[name]]``
  links between memories (:func:`find_links`, :func:`replace_links`);
  the index's load caps: :func:`truncate_entrypoint`; the manifest of existing memories:
  :func:`scan_memory_files` / :func:`format_manifest`.
- safety: :func:`atomic_write`, :func:`file_lock`, :func:`update_file`, the secret
  scanner (:func:`scan_secrets`, :func:`redact`), and the trash that makes forgetting
  undoable (:func:`forget_memory`, :func:`restore_memory`, :func:`empty_trash`), and
  the repair step after a crash (:func:`repair_memory_dir`), whose index lines the file
  tools write as a memory is saved (:func:`index_memory_file`).
"""

from memdir.store._atomic import atomic_write, file_lock, lock_path, update_file
from memdir.store._entrypoint import (
    ENTRYPOINT_NAME,
    MAX_ENTRYPOINT_CHARS,
    MAX_ENTRYPOINT_LINES,
    EntrypointContent,
    strip_entrypoint_noise,
    truncate_entrypoint,
)
from memdir.store._frontmatter import (
    MEMORY_FORMATS,
    MEMORY_TYPES,
    MemoryFile,
    MemoryFormat,
    MemoryType,
    find_links,
    format_memory_file,
    iso_timestamp,
    memory_slug,
    parse_memory_file,
    replace_links,
    stamp_memory_file,
    type_of_file_name,
)
from memdir.store._location import (
    MEMDIR_DIR_ENV,
    canonical_git_root,
    claude_config_home,
    default_memory_dir,
    find_git_root,
    sanitize_path,
)
from memdir.store._memory_dir import TEAM_DIR_NAME, MemoryDir
from memdir.store._repair import (
    STALE_TEMP_SECONDS,
    Repair,
    RepairKind,
    index_memory_file,
    repair_memory_dir,
    without_duplicate_lines,
)
from memdir.store._scan import (
    FRONTMATTER_MAX_LINES,
    MemoryHeader,
    format_manifest,
    scan_memory_files,
)
from memdir.store._secrets import (
    SECRET_RULES,
    SecretFinding,
    SecretRule,
    contains_secret,
    redact,
    scan_secrets,
)
from memdir.store._trash import (
    TRASH_DIR_NAME,
    TRASH_KEEP_SECONDS,
    TrashEntry,
    empty_trash,
    forget_memory,
    last_trashed,
    restore_memory,
    trash_entries,
)
from memdir.store._user_layer import (
    MEMDIR_USER_DIR_ENV,
    USER_LAYER_DIR_NAME,
    move_memory,
    resolve_user_layer,
    user_memory_dir,
)

__all__ = [
    "ENTRYPOINT_NAME",
    "FRONTMATTER_MAX_LINES",
    "MAX_ENTRYPOINT_CHARS",
    "MAX_ENTRYPOINT_LINES",
    "MEMDIR_DIR_ENV",
    "MEMDIR_USER_DIR_ENV",
    "MEMORY_FORMATS",
    "MEMORY_TYPES",
    "SECRET_RULES",
    "STALE_TEMP_SECONDS",
    "TEAM_DIR_NAME",
    "TRASH_DIR_NAME",
    "TRASH_KEEP_SECONDS",
    "USER_LAYER_DIR_NAME",
    "EntrypointContent",
    "MemoryDir",
    "MemoryFile",
    "MemoryFormat",
    "MemoryHeader",
    "MemoryType",
    "Repair",
    "RepairKind",
    "SecretFinding",
    "SecretRule",
    "TrashEntry",
    "atomic_write",
    "canonical_git_root",
    "claude_config_home",
    "contains_secret",
    "default_memory_dir",
    "empty_trash",
    "file_lock",
    "find_git_root",
    "find_links",
    "forget_memory",
    "format_manifest",
    "format_memory_file",
    "index_memory_file",
    "iso_timestamp",
    "last_trashed",
    "lock_path",
    "memory_slug",
    "move_memory",
    "parse_memory_file",
    "redact",
    "repair_memory_dir",
    "replace_links",
    "resolve_user_layer",
    "restore_memory",
    "sanitize_path",
    "scan_memory_files",
    "scan_secrets",
    "stamp_memory_file",
    "strip_entrypoint_noise",
    "trash_entries",
    "truncate_entrypoint",
    "type_of_file_name",
    "update_file",
    "user_memory_dir",
    "without_duplicate_lines",
]
