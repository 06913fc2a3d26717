"""Glue for agent frameworks: one module per framework, each importing it only when used.

- :mod:`memdir.integrations.claude_agent_sdk`: a Stop hook for the Claude Agent SDK.
- :mod:`memdir.integrations.anthropic_memory`: memdir's memory tool as the Anthropic SDK's
  client-side memory tool, for its tool runner.
"""
