"""Files: UTF-8 input read with clear errors, and outputs that never look valid unless complete."""
import contextlib
import gzip
import os
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["read_text", "atomic_path", "prepare_output_dir"]


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
    """Yield a temporary name next to ``path`` (``.NAME.tmp-<pid>``) to write the file under.

    When the block succeeds the file is renamed to ``path`` (``os.replace``, atomic on one
    file system, replacing an existing file); on any failure, Ctrl-C included, the
    temporary is removed, so ``path`` is either the complete new file or untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def prepare_output_dir(out_dir) -> Path:
    """Create ``out_dir`` (and parents) and check that files can be created in it.

    Meant to run before any long work, so a bad path (an existing file, a path under a
    file, no permission) fails at once with the ``OSError``.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"output directory {out_dir} is an existing file")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out_dir):
        pass
    return out_dir
