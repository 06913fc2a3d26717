"""Rules: the part of a feedback memory that can be checked before the agent acts.

A saved correction ("we use pnpm, never npm") is prose the agent may not apply. When the
memory states a rule about actions that can be checked mechanically, the memory agent also
writes it in the memory's frontmatter (:mod:`memdir.rules._rule`); memdir keeps a copy in
``.memdir/rules.json`` (:mod:`memdir.rules._book`) and checks every tool call against it
(:mod:`memdir.rules._match`, with the shell parsed as bash would parse it:
:mod:`memdir.rules._shell`). In Claude Code, ``memdir hook pre-tool-use`` does this
(:mod:`memdir.rules._hook`): a rule that denies stops the call and tells the model why, in
the memory's own words.
"""

from memdir.rules._book import (
    FIRINGS_NAME,
    RULES_NAME,
    load_rules,
    read_firings,
    record_firings,
    set_enabled,
)
from memdir.rules._hook import answer, check_payload, message_for
from memdir.rules._match import Hit, check_tool_call, command_matches, path_matches
from memdir.rules._rule import FILE_TOOLS, Rule, rules_from_frontmatter
from memdir.rules._shell import invocations

__all__ = [
    "FILE_TOOLS",
    "FIRINGS_NAME",
    "RULES_NAME",
    "Hit",
    "Rule",
    "answer",
    "check_payload",
    "check_tool_call",
    "command_matches",
    "invocations",
    "load_rules",
    "message_for",
    "path_matches",
    "read_firings",
    "record_firings",
    "rules_from_frontmatter",
    "set_enabled",
]
