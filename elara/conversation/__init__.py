"""The conversation core: messages, the encrypted store, context and prompt building. No audio."""
