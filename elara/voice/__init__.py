"""Voice engines behind small adapters: wake word, voice activity, speech-to-text, text-to-speech."""
