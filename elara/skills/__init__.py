"""What is answered without the model: the intent matcher, local commands, computed answers
(arithmetic, unit conversions, the calendar), timers, announcements, spoken numbers."""
