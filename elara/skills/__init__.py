"""What is answered without the model: the intent matcher, local commands, timers,
announcements, spoken numbers."""
