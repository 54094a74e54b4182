import sys
from pathlib import Path

# benchmarks/ (baselines, graphs) and tests/ (reference.py: the one home of the references
# that tests and baselines share; benchmarks depend on tests, never the other way).
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
