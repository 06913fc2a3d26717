"""``memdir watch`` of a path that does not exist stops with one line instead of waiting."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memdir._cli import cli


def watch(*args: str) -> Result:
    """``memdir watch ARGS``, failed rather than left running if it starts watching."""
    outcome: list[Result] = []
    thread = threading.Thread(
        target=lambda: outcome.append(CliRunner().invoke(cli, ["watch", *args])), daemon=True
    )
    thread.start()
    thread.join(20.0)
    if thread.is_alive():
        pytest.fail("memdir watch is waiting on a path that does not exist")
    return outcome[0]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_watch_of_a_missing_path_is_one_line_and_exit_2(tmp_path: Path, as_json: bool) -> None:
    (tmp_path / "real").mkdir()
    missing = tmp_path / "no-such-path"
    args = [str(tmp_path / "real"), str(missing), "--memory-dir", str(tmp_path / "m")]
    result = watch(*args, *(["--json"] if as_json else []))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"nothing to watch at {missing}" in result.stderr
    if as_json:
        assert json.loads(result.stdout)["error"]["kind"] == "usage"
    else:
        assert result.stdout == ""
    assert not (tmp_path / "m").exists()
