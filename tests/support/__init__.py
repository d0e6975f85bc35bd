"""What the tests and the benchmarks share: ports and processes, config files, MCP clients and prompt answers,
the god-tool profiles, in-process backends, and Redis.

    processes   free ports, child processes (async for tests, blocking for bench), ``serve`` and backends
    configs     config data and TOML files built from a profile's own config file
    clients     real SDK clients in memory, prompt answers, error codes, a settable clock
    inprocess   a profile's backend server run inside the test process, over the SDK's in-memory transport
    profiles    the god-tools the safety suite runs against
    redis       a real redis-server on a loopback port
    pace        how fast this machine runs Python, the unit tier's budget's unit (scripts/test)
"""
