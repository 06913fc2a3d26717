"""The host core: what every framework integration does the same way, in one place.

A framework module (an *adapter*) keeps only what differs by framework: it reads the
framework's messages as the conversation grows, names the conversation by the
framework's own id, records the request its model last sent, says which endpoint and
client settings that model uses, and loads memory back through the framework's own
mechanism. It hands each finished turn to a :class:`HostCore`, which owns the rest::

    core = HostCore(memory_dir, model, config=config, sink=sink, notify=notify,
                    cwd=cwd, base_url=base_url, backend=backend, max_conversations=256)

    # as soon as the host's client is seen (memdir's own client is built in a thread):
    endpoint = Endpoint(ClientSettings.of(sdk_client), model_name)
    core.host_model(endpoint)

    # at a turn's end (never raises; a failure becomes an ``extract.error`` event):
    core.report(lambda: HostTurn(
        messages=conversation,          # read incrementally (GrowingReader, or the adapter's)
        conversation=conversation_id,   # the framework's own id; None: one default
        request=SentRequest(wire="chat", body=body, replaces=n, sent_at=t),  # or None
        endpoint=endpoint,              # or None: standalone on the user's/env/offline model
        fallback=None,                  # why there is no request, when there is none
    ))
    # (core.submit(turn) is the same, raising: to retry with another reading on TypeError)

    loaded = await core.aload_memory(conversation_id)   # LoadedMemory(instructions, index)
    text = await core.run_tool(tool, tool_input, cwd=cwd, conversation=conversation_id)
    context = core.tool_context(conversation_id)        # for a framework's own memory tool
    await core.drain(); core.drain_sync(); core.close()
    core.fallback_reason; core.extractor(conversation_id)

- :class:`HostCore`: the backend, made in one place (:func:`default_backend`: an
  ``InProcessBackend``, positions kept beside the memory; any ``MemoryBackend`` may be
  passed, the queue's ``QueueExtractor`` among them; ``Backend`` is that protocol); the
  host-model policy (the user's model, else the host's endpoint on a client of memdir's
  own, else ``$MEMDIR_MODEL``, else offline; a fork always on the host's endpoint); the
  error policy (:meth:`HostCore.failed`); memory loaded back (:meth:`HostCore.load_memory`,
  frozen per conversation so that its requests share one cached prefix); the memory tools
  (:meth:`HostCore.run_tool`, :meth:`HostCore.tool_context`); drain and close.
- :class:`ClientSettings` / :class:`Endpoint` / :class:`HostModel` / :class:`HostModels`:
  the host client's settings (base URL, key, organization, project, default headers and
  query, timeout, a custom ``http_client``'s transport, headers, auth and hooks) and
  memdir's model on a client of its own built from them in a worker thread, which
  outlives the host's client.
- :class:`SentRequest` and :func:`fork_params` (one builder per wire format,
  :func:`anthropic_fork_params` and :func:`chat_fork_params`, and one
  :func:`has_cache_breakpoint`, shared with the Claude Code hook through
  :mod:`memdir.integrations._wire`): the request as sent, and the fork built from it.
- :class:`Sessions`: an adapter's per-conversation state, the least recently used let go.
- :class:`GrowingReader`: a conversation read as it grows, each framework item once.
- :data:`MEMORY_FUNCTION_DESCRIPTION` / :data:`MEMORY_FUNCTION_SCHEMA`: the memory tool
  as a function tool, for models that do not know Anthropic's own.

Nothing here imports a framework.
"""

from memdir.extract import MemoryBackend as Backend
from memdir.integrations._host._backend import default_backend
from memdir.integrations._host._client import ClientSettings, Endpoint, HostModel, HostModels
from memdir.integrations._host._core import HostCore, HostTurn, LoadedMemory, Sessions
from memdir.integrations._host._reader import GrowingReader
from memdir.integrations._host._requests import (
    SentRequest,
    anthropic_fork_params,
    chat_fork_params,
    fork_params,
    has_cache_breakpoint,
)
from memdir.integrations._host._tools import MEMORY_FUNCTION_DESCRIPTION, MEMORY_FUNCTION_SCHEMA

__all__ = [
    "MEMORY_FUNCTION_DESCRIPTION",
    "MEMORY_FUNCTION_SCHEMA",
    "Backend",
    "ClientSettings",
    "Endpoint",
    "GrowingReader",
    "HostCore",
    "HostModel",
    "HostModels",
    "HostTurn",
    "LoadedMemory",
    "SentRequest",
    "Sessions",
    "anthropic_fork_params",
    "chat_fork_params",
    "default_backend",
    "fork_params",
    "has_cache_breakpoint",
]
