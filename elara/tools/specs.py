"""The tools built into Elara, as the model is offered them (pure: what each does is
`elara.tools.builtin`)."""

from __future__ import annotations

from elara.tools.calls import BUILTIN, ToolSpec


def _object(properties: dict[str, dict[str, object]], required: tuple[str, ...] = ()) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


CURRENT_TIME = ToolSpec(BUILTIN, "current_time", "The current local date, day of the week and time.",
                        _object({}), read_only=True)
SET_TIMER = ToolSpec(BUILTIN, "set_timer", "Start a countdown timer that rings when it is done.", _object({
    "seconds": {"type": "integer", "minimum": 1, "description": "How long it runs, in seconds."},
    "name": {"type": "string", "description": "A short name for it, such as pasta (optional)."},
}, ("seconds",)))
SET_REMINDER = ToolSpec(BUILTIN, "set_reminder",
                        "Remind the person of something: at a time of day, or after some seconds.", _object({
    "text": {"type": "string", "description": "What to remind them of, such as call mum."},
    "at": {"type": "string", "pattern": "^([01]?[0-9]|2[0-3]):[0-5][0-9]$",
           "description": "The local time of day, 24-hour HH:MM (18:00 for six in the evening)."},
    "in_seconds": {"type": "integer", "minimum": 1,
                   "description": "Or: how many seconds from now."},
}, ("text",)))
LIST_TIMERS = ToolSpec(BUILTIN, "list_timers", "The timers and reminders that are set, with the time left.",
                       _object({}), read_only=True)
CANCEL_TIMER = ToolSpec(BUILTIN, "cancel_timer", "Cancel a timer or reminder.", _object({
    "name": {"type": "string",
             "description": "The timer's name or the reminder's text; leave out for the only one."},
    "all": {"type": "boolean", "description": "Cancel every timer and reminder."},
}))
REMEMBER_FACT = ToolSpec(BUILTIN, "remember_fact", "Remember a fact about the person for later conversations.",
                         _object({"fact": {"type": "string",
                                           "description": "The fact, such as: The user's sister is called Ann."}},
                                 ("fact",)))
FORGET_FACT = ToolSpec(BUILTIN, "forget_fact", "Forget a remembered fact about the person.",
                       _object({"fact": {"type": "string", "description": "What to forget."}}, ("fact",)))
SEARCH_HISTORY = ToolSpec(BUILTIN, "search_history",
                          "Search earlier conversations with the person for what was said.", _object({
    "query": {"type": "string", "description": "Words to look for, such as boiler."},
    "days_ago": {"type": "integer", "minimum": 0,
                 "description": "Only that day: 0 today, 1 yesterday (optional)."},
}, ("query",)), read_only=True)
COMPUTE = ToolSpec(BUILTIN, "compute",
                   "Work out arithmetic, unit conversions and calendar questions exactly.", _object({
    "question": {"type": "string",
                 "description": "The question in words, such as: what is 17 times 23, "
                                "how many days until Christmas, 5 miles in kilometres."},
}, ("question",)), read_only=True)

#: every built-in tool, in the order the model is offered them
BUILTIN_SPECS = (CURRENT_TIME, SET_TIMER, SET_REMINDER, LIST_TIMERS, CANCEL_TIMER, REMEMBER_FACT,
                 FORGET_FACT, SEARCH_HISTORY, COMPUTE)
