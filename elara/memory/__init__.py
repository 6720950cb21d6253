"""Memory beyond the last few turns: summaries, facts about the user, retrieval, retention.

Every memory record is a System-role message in the same encrypted store, told apart by
`metadata["kind"]`, so the history stays one readable, exportable place."""
