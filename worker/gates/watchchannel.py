"""The watched pytest run's channel and report, inside the sandbox: the part of the
bootstrap (:mod:`worker.gates.watchboot`, whose docstring gives the steps) that keeps the
test interpreter out of the reach of the processes the tests start (step 0), signs the
channel's records (step 1) and holds the JUnit report in a sealed memfd (step 5).

:func:`worker.gates.watch.bootstrap_source` puts this module's code in place of
watchboot's import of it, so the two run as one ``-c`` program whose steps all run with
private globals (watchboot's ``_run_privately`` rebinds every function named in its
``_STEPS``). Like watchboot, it imports nothing from Ribbit: it runs in the repository's
interpreter.
"""

from __future__ import annotations

from collections.abc import Callable

Send = Callable[[str, bytes], None]
Record = Callable[[str, str, "str | None", int], None]
Read = Callable[[int], "tuple[bytes | None, bool]"]
Kept = Callable[[], bool]


def _undumpable() -> Kept:
    """Step 0: PR_SET_DUMPABLE 0 (its children get dumpable back at their execve).
    Returns ``kept``: whether the interpreter is non-dumpable now, made so again where
    code in the process undid it (a ``prctl(PR_SET_DUMPABLE, 1)`` through ctypes calls
    no Python code, so only asking the kernel again shows it). prctl is taken here,
    before any repository code runs; without it, ``kept`` is always False."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):

        def never() -> bool:
            return False

        return never

    def kept() -> bool:
        if prctl(3, 0, 0, 0, 0) == 0:  # PR_GET_DUMPABLE
            return True
        prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        return False

    prctl(4, 0, 0, 0, 0)
    return kept


def _dumpable_watch(kept: Kept, record: Record) -> Callable[[], None]:
    """``check_dumpable``: a ``dumpable`` record (once: the recorder keeps one per site)
    whenever the interpreter is found dumpable, as it is where step 0 failed."""

    def check_dumpable() -> None:
        if not kept():
            what = "the test interpreter was dumpable (PR_GET_DUMPABLE) while the tests ran"
            record("dumpable", what, None, 0)

    return check_dumpable


def _private_report(fd: int) -> tuple[str, Callable[[], str | None], Read]:
    """Step 5's report in the memfd ``fd``: the path pytest writes, ``seal`` (why it
    could not be sealed, or None) and ``read``: at most ``cap`` + 1 bytes (None if
    empty) and whether ``fd`` stayed that memfd throughout (if not, no bytes)."""
    import fcntl
    import os

    fstat, pread, control, add_seals = os.fstat, os.pread, fcntl.fcntl, fcntl.F_ADD_SEALS
    seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
    made = fstat(fd)
    identity = (made.st_dev, made.st_ino)
    done: list[str | None] = []

    def same() -> bool:
        try:
            now = fstat(fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == identity

    def seal() -> str | None:
        if not done:
            why = None if same() else "the report's descriptor was replaced"
            try:
                if why is None:
                    control(fd, add_seals, seals)
            except OSError as exc:
                why = f"the report could not be sealed ({exc.strerror})"
            done.append(why)
        return done[0]

    def read(cap: int) -> tuple[bytes | None, bool]:
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            if not same():
                return None, False
            chunk = pread(fd, cap + 1 - size, size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        # Again after the last read: a thread's dup2 between a check and its pread put
        # other bytes in, and only a descriptor still the memfd vouches for them.
        if not same():
            return None, False
        return b"".join(chunks) or None, True

    return f"/proc/self/fd/{fd}", seal, read


def _open_channel(channel: int, report_fd: int) -> Send:
    """Step 1: the key goes out as the channel's first record; the returned ``send``
    signs every later one. The key lives only in ``send``'s closure, as its HMAC pads;
    in a forked child that kept them, ``send`` writes an unsigned ``child`` line."""
    import binascii
    import hashlib
    import os

    write = os.write
    getpid = os.getpid
    main_pid = getpid()
    # Only C functions taken now, never looked up again: the code under test may
    # rebind module attributes (``binascii.b2a_base64 = ...``) that raise no audit event.
    sha256 = hashlib.sha256
    to_base64 = binascii.b2a_base64

    def b64(data: bytes) -> bytes:
        return to_base64(data, newline=False)

    key = os.urandom(32)
    inner = bytearray(b ^ 0x36 for b in key.ljust(64, b"\0"))
    outer = bytearray(b ^ 0x5C for b in key.ljust(64, b"\0"))
    sequence = [0]
    os.set_inheritable(channel, False)  # children the tests start do not get it
    write(channel, b"\nribbit1 0 key " + b64(key) + b" -\n")
    del key
    forgotten = _forget_at_fork((inner, outer), (channel, report_fd))

    import _thread

    one_at_a_time = _thread.RLock()  # numbers go out in order, whatever thread

    def send(kind: str, payload: bytes) -> None:
        if getpid() != main_pid:
            # A forked child: its records would reuse sequence numbers.
            if not forgotten:
                write(channel, f"\nribbit1 child {getpid():d}\n".encode())
            return
        with one_at_a_time:
            sequence[0] += 1
            body = f"{sequence[0]} {kind} ".encode() + b64(payload)
            mac = sha256(outer + sha256(inner + body).digest()).hexdigest().encode()
            write(channel, b"\nribbit1 " + body + b" " + mac + b"\n")

    return send


def _forget_at_fork(pads: tuple[bytearray, ...], fds: tuple[int, ...]) -> list[bool]:
    """In a child ``os.fork`` makes, ``pads`` are zeroed and ``fds`` closed before its own
    fork handlers run (registered later); the returned list is then non-empty."""
    import os

    close = os.close
    forgotten: list[bool] = []

    def forget() -> None:
        for pad in pads:
            pad[:] = bytes(len(pad))
        forgotten.append(True)
        for fd in fds:
            try:  # noqa: SIM105 (contextlib's names are the tests' to rebind)
                close(fd)
            except OSError:
                pass

    os.register_at_fork(after_in_child=forget)
    return forgotten


def _recorder(send: Send) -> Record:
    """``record``: one ``tamper`` record per site, sent at once; past a limit, one
    ``overflow`` record and nothing more."""
    from _json import encode_basestring_ascii as quote

    seen: set[tuple[str, str, int]] = set()
    limit = 200

    def record(mechanism: str, what: str, path: str | None, line: int) -> None:
        site = (mechanism, path or "", line)
        if site in seen:
            return
        seen.add(site)
        if len(seen) > limit:
            if len(seen) == limit + 1:
                send("overflow", b"")
            return
        shown = "null" if path is None else quote(path)
        event = f'{{"mechanism": {quote(mechanism)}, "what": {quote(what)}, "path": {shown}, '
        send("tamper", f'{event}"line": {line:d}}}'.encode())

    return record


def _send_results(
    send: Send, data: bytes | None, report_cap: int, status: int, failed: int
) -> None:
    if data is not None and len(data) > report_cap:
        send("oversize", b"")  # judged on the exit status, as an unwatched run would be
    elif data is not None:
        send("report", data)
    send("end", f'{{"status": {status:d}, "failed": {failed:d}}}'.encode())
