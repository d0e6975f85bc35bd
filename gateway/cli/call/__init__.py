"""``mcp-safety-gateway call`` and ``tools``: a terminal MCP client of a running gateway.

terminal   connect, list, call, answer prompts at the keyboard (a non-terminal stdin cancels them)
arguments  ``key=value`` pairs into JSON arguments, by the tool's own inputSchema
failures   what a refusal means, in a sentence, for a person at a terminal
approval   a write waiting on the approval page: its link, a countdown, Ctrl-C ends the wait and says the state
"""
