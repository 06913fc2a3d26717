"""The ``memdir`` command.

The command needs the ``[cli]`` extra; without it, it says how to install it instead of
failing with a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``memdir`` command line (the console script's entry point)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["hook", "claude-code"]:
        # Claude Code waits for its Stop hook: this path skips click and everything else.
        from memdir._hook_entry import run

        if run(args[2:]):
            return
    if args[:2] == ["hook", "pre-tool-use"]:
        # Claude Code waits for it before every tool call: the same short path.
        from memdir.rules._hook import hook_main

        if hook_main(args[2:]):
            return
    try:
        from memdir._cli import cli
    except ModuleNotFoundError as exc:
        if exc.name not in ("click", "rich"):
            raise
        from memdir.errors import MissingExtraError, one_line

        error = MissingExtraError("the memdir command", "cli", one_line(exc))
        sys.stderr.write(f"memdir: {error}\n")
        raise SystemExit(2) from None
    cli.main(args=args, prog_name="memdir")
