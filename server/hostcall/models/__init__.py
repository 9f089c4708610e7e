"""Model adapters: the scripted default and an OpenAI-compatible client."""
