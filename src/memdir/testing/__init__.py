"""A test kit for memdir and for code built on it: models and servers that need no network.

- :class:`ScriptedModel` answers from a script and fails on an unexpected or unused step;
  :class:`FunctionModel` lets a function decide.
- :class:`FakeAnthropicServer` and :class:`FakeOpenAIServer` are real HTTP servers on
  127.0.0.1 that the official SDKs reach through ``base_url``. They record every request,
  inject faults, and keep a prompt cache by each provider's rules, so that cache sharing
  can be asserted rather than hoped for.
"""

from memdir.testing._models import FunctionModel, ScriptedModel, ScriptError, Step
from memdir.testing._servers import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    Fault,
    RecordedRequest,
    Reply,
)

__all__ = [
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "Fault",
    "FunctionModel",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "Step",
]
