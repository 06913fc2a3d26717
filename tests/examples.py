"""Loading an example script as a module, so that a test can call its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(filename: str) -> ModuleType:
    """``examples/<filename>`` imported under a name of its own (its ``__main__`` part
    does not run)."""
    path = EXAMPLES / filename
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
