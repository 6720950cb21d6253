"""The language models and the turn they answer: Ollama, the embedded model, provider choice,
the thinking filter, sentences, personalities, and the orchestrator."""
