"""Files as untrusted input and outputs written whole or not at all: the one guard for what may be read
and written, and the one atomic write (a temporary file in the target's folder, renamed into place).

Inputs must be regular files (a FIFO, a device or a folder is refused, never read: reading a FIFO
would wait forever). An output target that is a symlink is written through (the file it points to is
replaced, the link stays); one that is a folder, FIFO, device or socket is refused. Sizes a file asks
for are checked against the machine's memory before anything is allocated (``check_memory``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import DequantizeError

__all__ = [
    "atomic_path",
    "finish",
    "temporary",
    "output_path",
    "open_input",
    "read_input",
    "folder_lock",
    "check_memory",
    "memory_limit",
]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _path_text(path: str | os.PathLike[str] | bytes) -> str:
    if isinstance(path, bytes):
        raise DequantizeError("a file name must be a str or os.PathLike, not bytes")
    text = os.fspath(path)
    if "\0" in text:
        raise DequantizeError(f"file name {text!r} contains a NUL byte")
    return text


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading, refused (``DequantizeError``) unless it is a regular file.

    Opened without blocking first, so a FIFO is refused instead of waiting for a writer.
    """
    text = _path_text(path)
    fd = os.open(text, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DequantizeError(f"is {_kind(mode)}, not a regular file: refused as input", path=text)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file ``path`` (see ``open_input``), checked against the memory limit."""
    with open_input(path) as f:
        check_memory(os.fstat(f.fileno()).st_size, f"reading {os.fspath(path)}")
        return f.read()


def output_path(target: str | os.PathLike[str], *, reads: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """The file a write to ``target`` replaces: symlinks followed (written through, the link stays).

    Refused (``DequantizeError``): a target that is a folder, FIFO, device or socket, whose folder does
    not exist, or that is one of the files in ``reads`` (the command's inputs: never modified).
    """
    text = _path_text(target)
    if not text:
        raise DequantizeError("the output file name is empty")
    real = Path(os.path.realpath(text))
    try:  # what the name itself leads to: ``/dev/stdout``'s link to a pipe has no path realpath can follow
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise DequantizeError(f"cannot write the output: {e.strerror}", path=text) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise DequantizeError(f"is {_kind(mode)}: refused as an output (name a regular file)", path=text)
    if not real.parent.is_dir():
        raise DequantizeError(f"the output's folder {real.parent} does not exist", path=text)
    if any(os.path.realpath(r) == str(real) for r in reads):
        raise DequantizeError("is a file the input reads: refused as an output (choose another name)", path=text)
    return real


@contextlib.contextmanager
def temporary(real: Path, suffix: str = "") -> Iterator[Path]:
    """A new empty file beside ``real`` (``.NAME.XXXX<suffix>.tmp``), removed on the way out unless it was
    renamed into place meanwhile (``finish``). An ``OSError`` of the temporary file (or of no file: a full
    disk) is raised naming ``real``."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=suffix + ".tmp", dir=real.parent)
    except OSError as e:
        raise _unwritable(e, real) from None
    try:  # from the first bytecode after mkstemp: Ctrl-C anywhere from here leaves no temporary file
        os.close(fd)
        yield Path(tmp)
    except OSError as e:  # a full disk, a file size limit: the output is named, not the temporary file
        if e.filename is not None and e.filename != tmp:
            raise
        raise _unwritable(e, real) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _unwritable(e: OSError, real: Path) -> OSError:
    """``e`` (of its own class: ``PermissionError``...) naming the output rather than a temporary file."""
    if e.errno is None:
        return e
    return type(e)(e.errno, e.strerror, str(real))


@contextlib.contextmanager
def atomic_path(
    target: str | os.PathLike[str], suffix: str = "", *, reads: Iterable[str | os.PathLike[str]] = ()
) -> Iterator[Path]:
    """A temporary path beside ``target``; on success it replaces ``target``, on failure it is removed.

    The caller writes the temporary path (by name); ``target`` is never seen half-written, even when it
    is also the input being read. ``target`` is checked by ``output_path`` (a symlink is written through).
    """
    real = output_path(target, reads=reads)
    with temporary(real, suffix) as tmp:
        yield tmp
        finish(tmp, real)


_umask_lock = threading.Lock()


def _umask() -> int:
    """The process's umask, read without setting it where the system says it (Linux's
    ``/proc/self/status``): ``os.umask`` only sets, and two threads setting and restoring it at once can
    leave it at 0 for the whole process."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:  # elsewhere: set and put back, one thread of this package at a time
        umask = os.umask(0)
        os.umask(umask)
    return umask


def finish(tmp: Path, real: Path) -> None:
    """Install the written temporary file ``tmp`` as ``real``: the target's mode (or the umask's
    default, not mkstemp's 0600), renamed into place."""
    try:
        mode = real.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    os.chmod(tmp, mode)
    os.replace(tmp, real)


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive advisory lock on ``folder`` (``flock`` on POSIX; none elsewhere), held by writers of
    this package while they install a model and its data file, so that two never interleave."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(os.fspath(folder), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def memory_limit() -> int:
    """The most bytes one array may take: the machine's physical memory (``sysconf``), else 2**62."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 1 << 62


def check_memory(nbytes: int, what: str, *, path: str | None = None) -> None:
    """Refuse (``DequantizeError``) ``what`` when it needs more than ``memory_limit()`` bytes."""
    limit = memory_limit()
    if nbytes > limit:
        raise DequantizeError(
            f"{what} needs {nbytes:,} bytes, more than this machine's memory ({limit:,} bytes): refused", path=path
        )
