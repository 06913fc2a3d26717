"""Models that answer from a script or a function, for tests that need no network."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from memdir.errors import ModelError
from memdir.messages import Message
from memdir.models import ModelRequest, ModelResponse, Usage

__all__ = ["FunctionModel", "ScriptError", "ScriptedModel", "Step"]

Step: TypeAlias = ModelResponse | Message | str | BaseException
"""One scripted answer: a full response, an assistant message, plain text, or an
exception to raise (a :class:`~memdir.errors.ModelError` to simulate a provider failure)."""


class ScriptError(AssertionError):
    """The code under test asked a scripted model something the script did not expect."""


def as_response(step: ModelResponse | Message | str) -> ModelResponse:
    """A :class:`ModelResponse` for a scripted answer."""
    if isinstance(step, ModelResponse):
        return step
    message = Message.assistant(step) if isinstance(step, str) else step
    if message.role != "assistant":
        raise ScriptError(f"a scripted answer must be an assistant message, not {message.role}")
    return ModelResponse(
        message=message,
        usage=Usage(output_tokens=max(1, len(message.text) // 4)),
        stop_reason="tool_use" if message.tool_uses else "end_turn",
    )


class ScriptedModel:
    """Answers requests with the next step of a script, and records every request.

    A request after the script has run out raises :class:`ScriptError` (and is
    remembered, so :meth:`assert_all_used` reports it even if the caller swallowed the
    error); :meth:`assert_all_used` also fails when steps were never asked for.
    """

    def __init__(self, steps: Sequence[Step] = (), *, name: str = "scripted:model") -> None:
        self._steps = list(steps)
        self._name = name
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""
        self.unexpected: list[ModelRequest] = []
        """Requests that arrived when no step was left."""

    @property
    def name(self) -> str:
        """The spec this model reports (``scripted:model`` unless given)."""
        return self._name

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._steps)

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        self._steps.extend(steps)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Record ``request`` and answer with the next step."""
        self.requests.append(request)
        if not self._steps:
            self.unexpected.append(request)
            raise ScriptError(f"request {len(self.requests)} arrived but the script has ended")
        step = self._steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return as_response(step)

    def assert_all_used(self) -> None:
        """Fail if steps were left over or a request came after the script ended."""
        if self.unexpected:
            raise ScriptError(f"{len(self.unexpected)} request(s) came after the script ended")
        if self._steps:
            raise ScriptError(f"{len(self._steps)} scripted step(s) were never used")


ModelFunction: TypeAlias = Callable[
    [ModelRequest], ModelResponse | Message | str | Awaitable[ModelResponse | Message | str]
]


class FunctionModel:
    """Answers each request by calling a function (plain or async) with it.

    The function sees the whole :class:`ModelRequest` and returns a response, an
    assistant message or text. An exception it raises that is not a
    :class:`~memdir.errors.ModelError` is wrapped in one, as a provider failure would be.
    """

    def __init__(self, function: ModelFunction, *, name: str = "function:model") -> None:
        self.function = function
        self._name = name
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    @property
    def name(self) -> str:
        """The spec this model reports (``function:model`` unless given)."""
        return self._name

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Record ``request`` and answer with what the function returns."""
        self.requests.append(request)
        try:
            answer = self.function(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except ModelError:
            raise
        except ScriptError:
            raise
        except Exception as exc:
            raise ModelError(f"{self._name}: {type(exc).__name__}: {exc}") from exc
        return as_response(answer)
