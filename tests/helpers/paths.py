"""Where the repository's files are, for tests that read them (docs, examples, the package)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/helpers/paths.py -> the repository
