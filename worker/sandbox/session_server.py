"""The bubblewrap sandbox's resident process: runs each exec INSIDE one long-lived bwrap.

Shipped as text on its stdin, read by a short bootstrap started as the sandbox's
command (session.py: ``SERVER_BOOTSTRAP``; so the model's ``ps`` does not list this
file as a command line), so ``/tmp``, ``$HOME`` and background processes live as long
as the sandbox, as they do in a container (and in the pod the model was trained in),
and die with it.

Protocol, one JSON object per line. The host writes requests on stdin:
``{"id", "argv", "env", "cwd", "timeout", "cap"}``; this process answers on stdout:
``{"id", "rc", "out", "err", "out_total", "err_total"}`` (``out``/``err`` base64, at
most ``cap`` bytes each). A request with ``"stop_all": true`` runs nothing: it kills
every other process of the sandbox user and answers (before the host reads the
workspace). Each command runs in a process group of its own, and this process keeps its
time the way ``timeout -k G T`` would (and answers as it does): at T the group gets
SIGTERM (and SIGCONT), G seconds later SIGKILL; the answer is 124, or 137 when SIGKILL
was needed. No ``timeout`` process per command: that was a second fork and exec, and a
second process to wake, on every exec. When the command ends, what is left in its group
is killed; what it started in a session of its own lives on (the agent's tool runner
runs Bash that way, so the model's background processes persist, as in the pod it was
trained in). When it times out, every other process of the sandbox user is killed too
(``kill(-1)``), as the docker backend does, so nothing a runaway command detached
survives it.

Nothing here polls while it waits: the loop sleeps until a request, output, a command's
exit (its pidfd) or the next deadline, so an idle sandbox costs no CPU and an exit is
answered at once.

Everything here runs as the unprivileged sandbox user inside the sandbox's
namespaces. It makes itself non-dumpable, so the sandbox's other processes (the same
user) cannot open its pipes through ``/proc/<pid>/fd`` to read requests or answer in
its place, nor ptrace it; they can still kill it. The host treats every answer as
untrusted data all the same (bounded lines, strict parsing, random ids).

Started on the bubblewrap backend as bwrap's command, on the docker backend as one
long-lived exec whose attached stream carries the same lines (worker/sandbox/session.py
is the host's side). Written for any python3 an image may have (no annotations, no
3.11-only call without a fallback).
"""

import base64
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time

KILL_GRACE_S = 2
# What ``timeout`` answers: the deadline passed (its SIGTERM sufficed), or SIGKILL was needed.
TIMED_OUT = 124
KILLED = 128 + signal.SIGKILL
# Without a pidfd (an old kernel or python) an exit is noticed only by looking again.
POLL_S = 0.1
MAX_TIMEOUT_S = 1e8
# One thread, no thread per command: a fork bomb that uses up RLIMIT_NPROC must not stop
# this process from answering (threads count against that limit too).

if sys.version_info >= (3, 11):  # noqa: UP036 (an image's python3 may be older)
    # setpgid in the vfork'd child: the spawn stays a vfork and exec.
    _OWN_GROUP = {"process_group": 0}  # type: dict
else:  # pragma: no cover (older images' python3): safe here, this process has one thread
    _OWN_GROUP = {"preexec_fn": os.setpgrp}  # type: dict


class Job:
    def __init__(self, request, proc):
        self.id = request.get("id")
        self.cap = int(request.get("cap") or 65536)
        self.proc = proc
        self.rc = None
        now = time.monotonic()
        self.term_at = now + float(request["timeout"])
        self.kill_at = self.term_at + KILL_GRACE_S
        # Output still held open by a background process is not waited for past this.
        self.deadline = self.kill_at + 1
        self.signalled = 0  # the last signal the deadline sent its group (0: none yet)
        self.kept = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
        self.total = {proc.stdout.fileno(): 0, proc.stderr.fileno(): 0}
        self.open = set(self.kept)
        # Closed through their file objects only: a bare os.close would leave the object
        # to close the number again later, when it may be another pipe (or stdin).
        self.files = {proc.stdout.fileno(): proc.stdout, proc.stderr.fileno(): proc.stderr}
        self.out_fd = proc.stdout.fileno()
        self.err_fd = proc.stderr.fileno()
        # Readable when the command's process ends: its exit wakes the loop at once.
        self.exit_fd = _pidfd(proc.pid)

    def feed(self, fd, chunk):
        self.total[fd] += len(chunk)
        room = self.cap - len(self.kept[fd])
        if room > 0:
            self.kept[fd] += chunk[:room]

    def next_wake(self):
        """When this job next needs a look with nothing to wake the loop before."""
        if self.rc is not None:
            return self.deadline  # ended; only its output may still be held open
        if self.signalled == 0:
            return self.term_at
        if self.signalled != signal.SIGKILL:
            return self.kill_at
        return self.deadline


def _pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # an old kernel or python: looked at every POLL_S
        return None


def _close_exit_fd(job, sel):
    if job.exit_fd is not None:
        sel.unregister(job.exit_fd)
        os.close(job.exit_fd)
        job.exit_fd = None


def _reply(rid, rc, out, err, out_total, err_total):
    message = {
        "id": rid,
        "rc": rc,
        "out": base64.b64encode(bytes(out)).decode(),
        "err": base64.b64encode(bytes(err)).decode(),
        "out_total": out_total,
        "err_total": err_total,
    }
    data = (json.dumps(message) + "\n").encode("ascii")
    while data:
        data = data[os.write(1, data) :]


def _start(request, sel, jobs):
    if request.get("stop_all"):
        # The host is about to read the workspace: nothing else may run meanwhile.
        _kill_all()
        _reply(request.get("id"), 0, b"", b"", 0, 0)
        return
    if not 0 < float(request["timeout"]) < MAX_TIMEOUT_S:
        # ``timeout`` refuses such an interval (125); a NaN here would never time out.
        note = b"invalid timeout\n"
        _reply(request.get("id"), 125, b"", note, 0, len(note))
        return
    try:
        proc = subprocess.Popen(
            [str(a) for a in request["argv"]],
            cwd=str(request.get("cwd") or "/"),
            env={str(k): str(v) for k, v in (request.get("env") or {}).items()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **_OWN_GROUP,
        )
    except OSError as exc:
        note = (str(exc) + "\n").encode()
        _reply(request.get("id"), 127, b"", note, 0, len(note))
        return
    job = Job(request, proc)
    for fd in job.open:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, job)
    if job.exit_fd is not None:
        sel.register(job.exit_fd, selectors.EVENT_READ, job)
    jobs.append(job)


def _finish(job, sel, jobs):
    _close_exit_fd(job, sel)
    for fd in list(job.open):
        sel.unregister(fd)
        job.files[fd].close()
    job.open.clear()
    _reply(
        job.id,
        job.rc,
        job.kept[job.out_fd],
        job.kept[job.err_fd],
        job.total[job.out_fd],
        job.total[job.err_fd],
    )
    jobs.remove(job)


def _signal_group(job, sig):
    with contextlib.suppress(OSError):
        os.killpg(job.proc.pid, sig)


def _signal_command(job, sig):
    """The command itself as well as its group, as ``timeout`` signals both: a command
    that moved itself into another group (setpgid) must not outlive its deadline. Safe
    by pid: it is this process's child, not yet reaped, so the pid is still its own."""
    _signal_group(job, sig)
    with contextlib.suppress(OSError):
        os.kill(job.proc.pid, sig)


def _exited(job):
    """Whether the command has ended, leaving it unreaped: while it is a zombie its pid
    (its group's id) cannot be reused, so the group kill that follows cannot hit another
    command's group."""
    try:
        return os.waitid(os.P_PID, job.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _exit_code(job, returncode):
    """The shell's code for the command's end, or ``timeout``'s when its time ran out."""
    if job.signalled:
        return KILLED if returncode == -signal.SIGKILL else TIMED_OUT
    return returncode if returncode >= 0 else 128 - returncode


def _watch(job, now):
    """Reap the command once it has ended; else signal its group at its deadlines.
    Returns True once its code is known."""
    if job.rc is None:
        if _exited(job):
            # What the command left in its process group goes with it; what it started in
            # a session of its own (the agent's Bash tool) stays.
            _signal_group(job, signal.SIGKILL)
            job.rc = _exit_code(job, job.proc.wait())
            if job.signalled:
                # A timeout: take out whatever the command detached (setsid, daemons).
                _kill_all()
        elif now >= job.kill_at and job.signalled != signal.SIGKILL:
            job.signalled = signal.SIGKILL
            _signal_command(job, signal.SIGKILL)
        elif now >= job.term_at and not job.signalled:
            job.signalled = signal.SIGTERM
            _signal_command(job, signal.SIGTERM)
            _signal_command(job, signal.SIGCONT)  # a stopped command must see its SIGTERM
    return job.rc is not None


def _kill_all():
    """kill(-1): every process this user may signal. Only ever inside the sandbox, as its
    unprivileged user (the host starts this with ``--inside-sandbox``): run on a host as
    root it would kill the whole machine."""
    if os.getuid() == 0 or "--inside-sandbox" not in sys.argv:
        return
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)


def _undumpable():
    """PR_SET_DUMPABLE 0: /proc/<pid>/fd and ptrace of this process need a capability
    the sandbox user lacks. Children get dumpable back at their execve, as usual."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _wait_s(jobs):
    """How long the loop may sleep: until the nearest deadline (None: no job runs)."""
    if not jobs:
        return None
    wait = max(0.0, min(job.next_wake() for job in jobs) - time.monotonic())
    if any(job.rc is None and job.exit_fd is None for job in jobs):
        wait = min(wait, POLL_S)
    return wait


def main():
    _undumpable()
    sel = selectors.DefaultSelector()
    os.set_blocking(0, False)
    sel.register(0, selectors.EVENT_READ, None)
    jobs = []  # type: list
    pending = b""
    while True:
        for key, _ in sel.select(timeout=_wait_s(jobs)):
            if key.data is None:
                chunk = os.read(0, 65536)
                if not chunk:
                    # The host is gone: leaving ends pid 1, and the kernel kills the rest.
                    return 0
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    try:
                        _start(json.loads(line.decode("utf-8")), sel, jobs)
                    except (ValueError, KeyError, TypeError):
                        continue
                continue
            job = key.data
            if key.fd == job.exit_fd:
                # Reaped below; the descriptor has told all it can.
                _close_exit_fd(job, sel)
                continue
            chunk = os.read(key.fd, 65536)
            if chunk:
                job.feed(key.fd, chunk)
            else:
                sel.unregister(key.fd)
                job.files[key.fd].close()
                job.open.discard(key.fd)
        now = time.monotonic()
        for job in list(jobs):
            if not _watch(job, now):
                continue
            if job.open and now > job.deadline:
                # Its output is still held open past its time: a runaway, as above.
                _kill_all()
            if not job.open or now > job.deadline:
                _finish(job, sel, jobs)


if __name__ == "__main__":
    sys.exit(main())
