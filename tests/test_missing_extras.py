"""A missing extra fails one way everywhere: a ``MissingExtraError`` (a ``ModuleNotFoundError``
and a ``UsageError``) whose one line names the extra to install."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@dataclass(frozen=True)
class Case:
    name: str
    blocked: tuple[str, ...]
    """Top-level packages made unimportable, as when the extra is not installed."""
    use: str
    """Python that uses the feature (after the packages are blocked)."""
    extra: str


CASES = [
    Case(
        "openai-agents integration",
        ("agents",),
        "import memdir.integrations.openai_agents",
        "openai-agents",
    ),
    Case(
        "openai-agents rules guardrail",
        ("agents",),
        "import memdir.integrations.openai_agents_rules",
        "openai-agents",
    ),
    Case(
        "pydantic-ai integration",
        ("pydantic_ai",),
        "import memdir.integrations.pydantic_ai",
        "pydantic-ai",
    ),
    Case(
        "pydantic-ai rules toolset",
        ("pydantic_ai",),
        "import memdir.integrations.pydantic_ai_rules",
        "pydantic-ai",
    ),
    Case(
        "langchain integration",
        ("langchain", "langchain_core"),
        "import memdir.integrations.langchain",
        "langchain",
    ),
    Case(
        "langchain rules middleware",
        ("langchain", "langchain_core"),
        "import memdir.integrations.langchain_rules",
        "langchain",
    ),
    Case(
        "anthropic memory tool",
        ("anthropic",),
        "import memdir.integrations.anthropic_memory",
        "anthropic",
    ),
    Case(
        "claude agent sdk hook",
        ("claude_agent_sdk",),
        "from memdir.integrations.claude_agent_sdk import MemdirStopHook\n"
        "MemdirStopHook().matcher()",
        "claude-agent-sdk",
    ),
    Case(
        "anthropic model",
        ("anthropic",),
        "from memdir.models import AnthropicModel\n"
        "AnthropicModel('claude-sonnet-5-5', api_key='k')",
        "anthropic",
    ),
    Case(
        "openai model",
        ("openai",),
        "from memdir.models import OpenAIModel\nOpenAIModel('gpt-4.1', api_key='k')",
        "openai",
    ),
    Case("postgres queue backend", ("procrastinate", "psycopg"), "import memdir.queue", "postgres"),
    Case(
        "opentelemetry sink",
        ("opentelemetry",),
        "from memdir.telemetry import OpenTelemetrySink\nOpenTelemetrySink()",
        "otel",
    ),
]

_PROBE = """
import importlib.abc, json, sys
blocked = {blocked!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

for name in list(sys.modules):
    if name.split(".")[0] in blocked:
        del sys.modules[name]
sys.meta_path.insert(0, Block())
from memdir.errors import MissingExtraError, UsageError
try:
{use}
except BaseException as exc:
    print(json.dumps({{
        "type": type(exc).__name__,
        "missing_extra": isinstance(exc, MissingExtraError),
        "import_error": isinstance(exc, ModuleNotFoundError),
        "usage_error": isinstance(exc, UsageError),
        "message": str(exc),
        "extra": getattr(exc, "extra", None),
    }}))
else:
    print(json.dumps(None))
"""


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_error_names_the_extra(case: Case) -> None:
    extras = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert case.extra in extras  # the extra the message names exists
    use = "\n".join("    " + line for line in case.use.splitlines())
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(blocked=set(case.blocked), use=use)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got is not None, f"{case.name}: nothing was raised"
    assert got["missing_extra"], got
    assert got["import_error"], got
    assert got["usage_error"], got
    assert got["extra"] == case.extra
    # memdir is installed from its source tree: the command names that tree.
    assert f"pip install -e '{_PYPROJECT.parent}[{case.extra}]'" in got["message"]
    assert "\n" not in got["message"]


def test_the_command_without_its_extra_says_so_in_one_line() -> None:
    code = _PROBE.format(blocked={"click"}, use="    from memdir.cli import main\n    main(['ls'])")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert "SystemExit" in result.stdout
    assert result.stderr.strip() == (
        "memdir: the memdir command needs the [cli] extra: "
        f"pip install -e '{_PYPROJECT.parent}[cli]' (No module named 'click')"
    )


def test_the_install_command_names_the_source_tree_or_says_where_it_goes(tmp_path: Path) -> None:
    from memdir.errors import install_command

    tree = tmp_path / "my memdir"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("[project]\nname = 'memdir'\n", encoding="utf-8")
    # Quoted for a shell: the path has a space, and the brackets are a glob.
    assert install_command("cli", tree) == f"pip install -e '{tree}[cli]'"
    assert install_command("cli", tmp_path / "site-packages") == (
        "pip install '<memdir source tree>[cli]'"
    )
