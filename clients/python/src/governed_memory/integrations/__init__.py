"""Adapters for agent frameworks, each an optional extra that imports its framework:

- `governed_memory.integrations.langgraph`: `GovernedMemoryStore`, a LangGraph `BaseStore`
  (`pip install 'governed-memory-client[langgraph]'`).
- `governed_memory.integrations.openai_agents`: `memory_tools(...)`, the OpenAI Agents SDK's
  function tools (`pip install 'governed-memory-client[openai-agents]'`).
"""
