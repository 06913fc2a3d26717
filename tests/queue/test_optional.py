"""The backend is an extra: the core never imports it, and without it the error says
which extra to install."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )


def test_the_core_and_the_cli_never_import_the_backend():
    result = _python(
        "import sys\n"
        "import memdir, memdir.cli, memdir.extract, memdir._cli, memdir._cli._queue\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('procrastinate', 'psycopg')]\n"
        "assert not bad, bad\n"
    )
    assert result.returncode == 0, result.stderr


def test_without_the_extra_the_error_names_it():
    result = _python(
        "import sys\n"
        "sys.modules['procrastinate'] = None\n"
        "from memdir.errors import UsageError\n"
        "try:\n"
        "    import memdir.queue\n"
        "except UsageError as exc:\n"
        "    print(exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "[postgres]" in result.stdout


def test_without_the_extra_the_commands_say_so_in_one_line():
    result = _python(
        "import sys\n"
        "sys.modules['procrastinate'] = None\n"
        "sys.modules['psycopg'] = None\n"
        "from memdir.cli import main\n"
        "main(['queue', 'status', '--db', 'host=127.0.0.1'])\n"
    )
    assert result.returncode == 2
    assert "[postgres]" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
