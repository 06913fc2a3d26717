"""Glue for agent frameworks: one module per framework, each importing it only when used.

- :mod:`memdir.integrations.claude_agent_sdk`: a Stop hook for the Claude Agent SDK.
- :mod:`memdir.integrations.anthropic_memory`: memdir's memory tool as the Anthropic SDK's
  client-side memory tool, for its tool runner.
- :mod:`memdir.integrations.openai_agents`: run hooks and agent hooks for the OpenAI Agents
  SDK, and converters for its input items.
- :mod:`memdir.integrations.pydantic_ai`: a pydantic-ai capability, and converters for its
  messages.
- :mod:`memdir.integrations.langchain`: an agent middleware for LangChain's ``create_agent``,
  a recipe for plain LangGraph graphs, and converters for LangChain messages.
"""
