"""A test kit for memdir and for code built on it: models and servers that need no network.

- :class:`ScriptedModel` answers from a script and fails on an unexpected or unused step;
  :class:`FunctionModel` lets a function decide.
- :class:`FakeAnthropicServer` and :class:`FakeOpenAIServer` are real HTTP servers on
  127.0.0.1 that the official SDKs reach through ``base_url``. They record every request,
  inject faults, and keep a prompt cache by each provider's documented rules (breakpoints
  and a 20-position look-back, per-model minimums, lifetimes, what invalidates what), so
  that cache sharing can be asserted rather than hoped for. They are as strict as the
  APIs where that moves a bill: a prompt past the model's context window is refused with
  the provider's 400, and reasoning models report (and bill as output) their unseen
  reasoning tokens.
- :class:`FakeClock` is a clock the test moves. Cache entries expire on the servers'
  ``clock`` (``time.monotonic`` unless given one), so a test of a five-minute lifetime
  passes a ``FakeClock`` and calls ``advance`` instead of sleeping::

      clock = FakeClock()
      with FakeAnthropicServer(replies, clock=clock) as server:
          ...  # the first request writes the cache
          clock.advance(5 * 60 + 1)  # the entry has expired: the next request misses
"""

from memdir.testing._clock import FakeClock
from memdir.testing._models import FunctionModel, ScriptedModel, ScriptError, Step
from memdir.testing._servers import (
    DEFAULT_REASONING_TOKENS,
    EFFORT_SHARE,
    FakeAnthropicServer,
    FakeOpenAIServer,
    Fault,
    RecordedRequest,
    Reply,
)

__all__ = [
    "DEFAULT_REASONING_TOKENS",
    "EFFORT_SHARE",
    "FakeAnthropicServer",
    "FakeClock",
    "FakeOpenAIServer",
    "Fault",
    "FunctionModel",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "Step",
]
