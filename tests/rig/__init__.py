"""The rig the tests and the benches share: a virtual sound card (PulseAudio), voice clips, the
daemon as a subprocess, and the protocol servers that stand in for Ollama and Wyoming."""
