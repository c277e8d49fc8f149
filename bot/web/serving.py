"""The web process's HTTP server: waitress, with a stop that drains.

waitress's own ``run()`` returns only once every connection is gone, so a single idle
keep-alive connection (a reverse proxy's pool, a client that keeps its session) kept
``ribbit serve`` running after SIGTERM until the orchestrator's SIGKILL, and its embedded
worker never got the warm shutdown that finishes or requeues its job. waitress's other
stop, an exception raised into its loop (Ctrl-C), drops the responses of requests in
flight: their deliveries are committed but the forge sees a broken connection.

:class:`DrainingServer` stops the way a deploy expects: the listener closes at once,
requests in flight are answered, idle connections are closed, and after ``drain_s`` what
is left (a client trickling a request in) is cut. It drives waitress's event loop one
poll at a time, so it relies on a few of waitress's attributes (``_map``,
``active_channels``, the channels' request and buffer state); the server tests exercise
each of them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from waitress import wasyncore
from waitress.server import BaseWSGIServer, create_server

log = logging.getLogger(__name__)

# Kubernetes sends SIGKILL 30 s after SIGTERM by default; the embedded worker's warm
# shutdown needs what is left after the drain.
DEFAULT_DRAIN_S = 10.0
# The task threads finish their current request within the drain; this is for one that
# outlived it (a handler stuck on the database).
THREADS_JOIN_S = 5.0


class DrainingServer:
    """A waitress server that :meth:`stop` ends gracefully, from any thread or a signal
    handler."""

    def __init__(self, server: BaseWSGIServer, drain_s: float = DEFAULT_DRAIN_S) -> None:
        self.server = server
        self.drain_s = drain_s
        self._stopping = threading.Event()
        # Held while the wake-up pipe is pulled or closed, so that a stop never writes to
        # a descriptor the pipe no longer owns.
        self._trigger_lock = threading.Lock()
        self._trigger_open = True

    @classmethod
    def create(
        cls, app: Any, *, drain_s: float = DEFAULT_DRAIN_S, **options: Any
    ) -> DrainingServer:
        """``options`` are waitress's (host, port, threads, ...); one listening socket."""
        server = create_server(app, **options)
        if not isinstance(server, BaseWSGIServer):  # several `listen` addresses
            raise ValueError("ribbit serves on one address (host and port)")
        return cls(server, drain_s)

    @property
    def url(self) -> str:
        return f"http://{self.server.effective_host}:{self.server.effective_port}"

    def stop(self) -> None:
        """Ask the loop to drain and return. Safe in a signal handler: it sets a flag and
        writes one byte to waitress's wake-up pipe, so the loop's poll returns now instead
        of at its timeout. The pipe stays open until the loop has ended."""
        self._stopping.set()
        # Not blocking: a signal handler that waited here, on the thread that holds the
        # lock to close the pipe, would never return. The loop is ending then anyway.
        if self._trigger_lock.acquire(blocking=False):
            try:
                if self._trigger_open:
                    self.server.pull_trigger()
            finally:
                self._trigger_lock.release()

    def run(self) -> None:
        """Serve until :meth:`stop`, then drain (at most ``drain_s``) and close."""
        server = self.server
        deadline: float | None = None
        try:
            while server._map:
                if self._stopping.is_set():
                    if deadline is None:
                        deadline = time.monotonic() + self.drain_s
                        self._close_listener()
                    if not self._close_idle() or time.monotonic() >= deadline:
                        break
                server.asyncore.loop(
                    timeout=server.adj.asyncore_loop_timeout,
                    map=server._map,
                    use_poll=server.adj.asyncore_use_poll,
                    count=1,
                )
        finally:
            self._close()

    def _close_listener(self) -> None:
        # The listener is the server object itself; its trigger (the wake-up pipe) stays,
        # since the task threads still pull it when their responses are ready.
        if self.server.socket is not None:
            log.info("stopping: no new connections; answering the requests in flight")
            wasyncore.dispatcher.close(self.server)

    def _close_idle(self) -> int:
        """Mark every idle connection to close on the next poll; the number still busy.

        Called between polls on the loop's thread, the only one that reads requests, so
        a connection seen idle here receives nothing more: the task threads only finish
        requests (writing their response before they drop it from ``requests``).
        """
        busy = 0
        for channel in list(self.server.active_channels.values()):
            receiving = channel.request is not None  # a request partly read
            if channel.requests or channel.total_outbufs_len or receiving:
                busy += 1
            elif not channel.will_close:
                channel.will_close = True  # waitress's own idle close (its maintenance)
        return busy

    def _close(self) -> None:
        server = self.server
        dispatcher = server.task_dispatcher
        dispatcher.shutdown(cancel_pending=True, timeout=THREADS_JOIN_S)
        for channel in list(server.active_channels.values()):
            # Idle ones marked to close, and, past the drain's deadline, busy ones: cut.
            channel.handle_close()
        self._close_listener()
        if not dispatcher.threads:
            # Only with no task thread left: one still running would write its wake-up
            # byte to whatever file reused the pipe's descriptor.
            with self._trigger_lock:
                self._trigger_open = False
                server.trigger.close()
        else:
            log.warning("%d request thread(s) still running at exit", len(dispatcher.threads))
