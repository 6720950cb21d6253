"""Sound in and out through sounddevice (PortAudio)."""
