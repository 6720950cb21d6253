"""What the model can do: tools it calls (built in, or from MCP servers), who may run them, and
the records of each call."""
