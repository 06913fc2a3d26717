"""Glue for agent frameworks: one module per framework, each importing it only when used.

- :mod:`memdir.integrations.claude_agent_sdk`: a Stop hook for the Claude Agent SDK.
"""
