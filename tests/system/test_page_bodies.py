"""Every route but /mcp reads at most a small body: 64 MB sent to the approval page without a cookie or token is
refused before it is read (the gateway's peak memory barely moves), whether its length is declared or chunked, and
a multipart body is refused outright; the small forms the page takes still work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.approvals import approvals_section, url_mode
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, peak_memory_bytes, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

HUGE = 64 * 1024 * 1024
ROUTES = ["/approvals/login", "/approvals", "/approvals/logout", "/approvals/api/ap_x", "/approvals/ap_x", "/healthz"]


async def chunks(total: int, size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    for _ in range(total // size):
        yield b"x" * size


async def post(http: httpx.AsyncClient, url: str, **sent: object) -> int | None:
    """The status the gateway answered, or None when it closed the connection while the body was still going."""
    try:
        return (await http.post(url, **sent)).status_code  # type: ignore[arg-type]
    except httpx.TransportError:
        return None


async def test_an_unauthenticated_huge_body_is_refused_before_it_is_read(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data = config_data(
        TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path, tools=url_mode(TENANTS.write_tool)
    )
    data["approvals"] = approvals_section(base)
    config = write_toml(data, tmp_path / "gateway.toml")
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": base}
    async with serve(config, port) as gateway, httpx.AsyncClient(base_url=base, timeout=60) as http:
        assert (await http.post("/approvals/login", content=b"token=wrong", headers=form)).status_code not in (413, 415)
        before = peak_memory_bytes(gateway.pid)
        with anyio.fail_after(120):
            for route in ROUTES:
                declared = await post(http, route, content=b"x" * HUGE, headers=form)
                assert declared in (413, None), (route, declared)
            streamed = await post(http, "/approvals/login", content=chunks(HUGE), headers=form)
            assert streamed in (413, None)
            async with httpx.AsyncClient(base_url=base, timeout=60) as fresh:  # refusals close their connection
                multipart = await fresh.post("/approvals/login", files={"token": ("t.txt", b"x" * 1024)})
                healthy = await fresh.get("/healthz")
        grown = peak_memory_bytes(gateway.pid) - before
        assert multipart.status_code == 415
        assert multipart.headers["cache-control"] == "no-store"
        assert healthy.status_code == 200
    assert grown < 2 * 1024 * 1024, f"the gateway's peak memory grew by {grown} bytes"
