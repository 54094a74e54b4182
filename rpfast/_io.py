"""Files: UTF-8 input read with clear errors, and outputs that never look valid unless complete."""
import contextlib
import errno
import gzip
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterator

__all__ = ["read_text", "atomic_path", "atomic_directory", "check_output_dir"]


def read_text(path, what: str, expected: str = "") -> str:
    """The UTF-8 text of file ``path`` (a ``.gz`` name is decompressed first).

    A missing file or a directory raises ``FileNotFoundError`` / ``IsADirectoryError``
    naming ``what`` and the path; bytes that are not gzip or UTF-8 raise ``ValueError``
    naming the line (and ``expected``, what the file should hold). A leading byte-order
    mark is dropped.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a directory, not a file")
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} does not exist")
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise ValueError(f"{path}: not a valid gzip file ({error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x})"
                         + (f"; expected {expected}" if expected else "")) from None
    return text[1:] if text.startswith("\ufeff") else text


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield a temporary name next to ``path`` (``.NAME.tmp-<pid>``, plus ``-<thread id>`` off the
    main thread, so two threads writing one path do not share it) to write the file under.

    When the block succeeds the file is renamed to ``path`` (``os.replace``, atomic on one
    file system, replacing an existing file); on any failure, Ctrl-C included, the
    temporary is removed, so ``path`` is either the complete new file or untouched.
    """
    path = Path(path)
    thread = "" if threading.current_thread() is threading.main_thread() else f"-{threading.get_ident()}"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}{thread}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def check_output_dir(out_dir, force: bool = False) -> Path:
    """Check before any long work that ``out_dir`` can be written as a whole directory.

    Refused, each with one clear error: an existing file; an existing non-empty directory
    unless ``force`` (:func:`atomic_directory` then replaces it), and even then the current
    directory or one holding it; a parent that cannot be created or written. Parents are
    created; ``out_dir`` itself is not, so a failed run leaves nothing there.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output directory {out_dir} is an existing file")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise FileExistsError(f"output directory {out_dir} exists and is not empty; pass --force to replace it")
        if Path.cwd().resolve().is_relative_to(out_dir.resolve()):
            raise ValueError(f"refusing to replace output directory {out_dir}: it holds the current directory")
    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    os.rmdir(tempfile.mkdtemp(prefix=f".{out_dir.name}.check-", dir=parent))  # can we create the sibling?
    return out_dir


@contextlib.contextmanager
def atomic_directory(out_dir, force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``out_dir`` (``.NAME.tmp-<pid>``) to write a
    whole set of outputs into, and rename it to ``out_dir`` when the block succeeds.

    ``out_dir`` is then either the complete new set or untouched: on any failure, Ctrl-C and
    the CLI's SIGTERM included, the temporary is removed. An existing empty ``out_dir`` is
    replaced by the rename itself; a non-empty one is refused (``FileExistsError``) unless
    ``force``, which moves it aside (``.NAME.old-<pid>``), renames the new one in and then
    deletes the old one: two renames, with SIGINT/SIGTERM/SIGHUP held back between them. A
    symbolic link is followed: the directory it points to is replaced.
    """
    shown = Path(out_dir)
    check_output_dir(shown, force)
    target = shown.resolve()
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    if tmp.exists():  # left by a killed run that had this process id
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        with _signals_held():
            _swap_in(tmp, target, shown, force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, target: Path, shown: Path, force: bool) -> None:
    """Rename ``tmp`` to ``target``; a non-empty ``target`` is moved aside first (``force``).
    An empty ``target`` that is in use (the current directory or holding it, a mount point)
    stays, and the files are renamed into it one by one."""
    if Path.cwd().resolve().is_relative_to(target) and target.is_dir() and not any(target.iterdir()):
        return _move_entries(tmp, target)
    try:
        os.rename(tmp, target)  # replaces a missing or empty directory in one step
        return
    except OSError as error:
        if error.errno == errno.EBUSY and target.is_dir() and not any(target.iterdir()):
            return _move_entries(tmp, target)
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not target.is_dir():
            raise
    if not force:  # it filled up while we were working
        raise FileExistsError(f"output directory {shown} exists and is not empty; pass --force to replace it")
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if old.exists():
        shutil.rmtree(old)
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _move_entries(tmp: Path, target: Path) -> None:
    for entry in tmp.iterdir():
        os.rename(entry, target / entry.name)
    tmp.rmdir()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP (delivered when the block ends) in the main thread."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
