"""Files that never look valid unless complete: atomic writes and output checks."""
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "prepare_output_dir"]


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
