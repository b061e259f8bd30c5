"""The loopback webhook receiver the delivery scenario drains a backlog into."""

from __future__ import annotations

import asyncio
import threading
import time

from bench.config import HOST, BenchError

# ---------------------------------------------------------------------------------------------------------
# The webhook receiver
# ---------------------------------------------------------------------------------------------------------

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class Receiver:
    """A webhook receiver on a loopback port, in a thread: answers 200 at once and notes when each delivery
    (`X-Service-Delivery`) first arrived. It does not check signatures: the tests do that."""

    def __init__(self) -> None:
        self.port = 0
        self._arrivals: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        if not self._ready.wait(10):
            raise BenchError("the webhook receiver did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def arrivals(self) -> dict[str, float]:
        """Wall-clock arrival time of every delivery so far."""
        with self._lock:
            return dict(self._arrivals)

    async def _main(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        async with server:
            await self._stopping.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = dict(
                    (name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:])
                )
                await reader.readexactly(int(headers.get("content-length") or 0))
                delivery = headers.get("x-service-delivery")
                if delivery:
                    with self._lock:
                        self._arrivals.setdefault(delivery, time.time())
                writer.write(_OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()
