"""The test suite; `tests.rig` is the sound-card rig the benches share."""
