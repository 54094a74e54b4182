"""Hostile-user hardening of the ``rpfast`` command (issue 8): one-line errors, atomic outputs,
strict edge lists, SMILES argument types, broken pipes, and a clear import error from a
source tree without the compiled extension; SIGTERM/SIGHUP handled like Ctrl-C and output
directories written whole (a later issue, defects 10 and 11)."""
import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rpfast
import rpfast.experiments.csl.experiment as csl_module
import rpfast.experiments.report as report_module
from tests.helpers.assertions import cli_fails, stream_failing_after_first_chunk
from tests.helpers.processes import start_command
from rpfast.cli import main
from rpfast.data import read_edge_list
from rpfast.experiments.csl.experiment import MODELS, CSLConfig
from rpfast.experiments.report import summarise, write_outputs

pytestmark = pytest.mark.backend_neutral  # the first CI run covers it (see conftest.py)

EDGE_LIST = "# a triangle with a tail and an isolated vertex\n1 2\n2 3\n3 1\n3 10\n42\n"
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))




@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text(EDGE_LIST)
    return path


def _leftovers(directory, keep):
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


# --- defect 2: `rpfast subsets --out` is atomic and refuses to overwrite -----------------

@pytest.mark.parametrize("suffix", [".npy", ".csv"])
@pytest.mark.parametrize("error, code, message", [
    (KeyboardInterrupt(), 130, "rpfast subsets: interrupted"),
    (ENOSPC, 2, "rpfast subsets: error: No space left on device"),
])
def test_subsets_failure_mid_write_leaves_no_output_and_no_temporary(
        suffix, error, code, message, graph, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seen = []
    stream_failing_after_first_chunk(monkeypatch, error, tmp_path, seen)
    err = cli_fails(["subsets", str(graph), "--k", "2", "--chunk-size", "1", "--no-progress",
                  "--out", "s" + suffix], capsys, code)
    assert err.strip() == message
    # The failure really came mid-write: the rows went to a temporary, not to the output name.
    assert f".s{suffix}.tmp-{os.getpid()}" in seen and "s" + suffix not in seen
    assert _leftovers(tmp_path, {"g.txt"}) == []


def test_subsets_failure_with_force_keeps_the_previous_output(graph, tmp_path, capsys, monkeypatch):
    out = tmp_path / "s.csv"
    out.write_text("previous\n")
    stream_failing_after_first_chunk(monkeypatch, KeyboardInterrupt(), tmp_path, [])
    cli_fails(["subsets", str(graph), "--k", "2", "--chunk-size", "1", "--no-progress", "--force",
            "--out", str(out)], capsys, 130)
    assert out.read_text() == "previous\n"
    assert _leftovers(tmp_path, {"g.txt", "s.csv"}) == []


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_subsets_refuses_an_existing_output_unless_forced(suffix, graph, tmp_path, capsys):
    out = tmp_path / ("s" + suffix)
    out.write_text("keep me")
    argv = ["subsets", str(graph), "--k", "2", "--no-progress", "--out", str(out)]
    err = cli_fails(argv, capsys)
    assert "already exists" in err and "--force" in err
    assert out.read_text() == "keep me"
    assert main(argv + ["--force"]) == 0
    rows = np.load(out) if suffix == ".npy" else np.loadtxt(out, delimiter=",", dtype=np.int64)
    assert rows.shape == (10, 2) and rows[0].tolist() == [1, 2]
    assert _leftovers(tmp_path, {"g.txt", out.name}) == []


def test_subsets_npy_output_loads_with_original_labels(graph, tmp_path):
    out = tmp_path / "s.npy"
    assert main(["subsets", str(graph), "--k", "3", "--prune", "disconnected", "--no-progress",
                 "--chunk-size", "1", "--out", str(out)]) == 0
    assert np.load(out).tolist() == [[1, 2, 3], [1, 3, 10], [2, 3, 10]]


def test_subsets_k_larger_than_the_graph_writes_an_empty_output(graph, tmp_path):
    out = tmp_path / "s.npy"
    assert main(["subsets", str(graph), "--k", str(1 << 40), "--no-progress", "--out", str(out)]) == 0
    assert np.load(out).shape == (0, 1 << 40)


def test_subsets_output_in_a_missing_directory_is_refused_before_work(graph, tmp_path, capsys):
    err = cli_fails(["subsets", str(graph), "--k", "2", "--out", str(tmp_path / "no" / "s.csv")], capsys)
    assert "does not exist" in err


# --- defect 3: `rpfast csl --out` is checked first and its files are written atomically ---

def _fake_results():
    rng = np.random.default_rng(0)
    runs = [{"model": m, "fold": f, "seed": 0, "accuracy": float(a), "final_train_loss": 0.1}
            for m in MODELS for f, a in enumerate(rng.uniform(0, 100, 2))]
    return {"config": {"epochs": 1}, "runs": runs, "summary": summarise(runs, MODELS), "seconds": 1.0,
            "embeddings": {m: rng.normal(size=(150, 4)) for m in MODELS},
            "labels": np.repeat(np.arange(10), 15)}


@pytest.mark.parametrize("make_out", [
    lambda tmp: tmp / "g.txt",            # an existing regular file
    lambda tmp: tmp / "g.txt" / "sub",    # a path under a file
])
def test_csl_bad_out_fails_before_any_training(make_out, graph, tmp_path, capsys, monkeypatch):
    def must_not_train(*args, **kwargs):
        raise AssertionError("trained before checking --out")

    monkeypatch.setattr(csl_module, "run_csl", must_not_train)
    err = cli_fails(["csl", "--epochs", "1", "--folds", "2", "--no-progress", "--out", str(make_out(tmp_path))],
                 capsys)
    assert err.startswith("rpfast csl: error: ") and "g.txt" in err
    assert graph.read_text() == EDGE_LIST


def test_csl_disk_full_while_writing_is_one_line_and_leaves_no_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(csl_module, "run_csl", lambda config, progress=True: _fake_results())

    def plot_until_disk_full(results, path, class_names, fmt=None):
        Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20_000)
        raise ENOSPC

    monkeypatch.setattr(report_module, "plot", plot_until_disk_full)
    out = tmp_path / "csl"
    err = cli_fails(["csl", "--no-progress", "--out", str(out)], capsys)
    assert err.strip() == "rpfast csl: error: No space left on device"
    # The directory is written whole under a temporary name: no output, no half set, no temporary.
    assert _leftovers(tmp_path, set()) == []


@pytest.mark.parametrize("stage", ["json", "plot"])
def test_write_outputs_interrupted_keeps_previous_files_and_no_temporary(stage, tmp_path, monkeypatch):
    out = tmp_path / "csl"
    classes = [f"R={r}" for r in range(10)]
    write_outputs(_fake_results(), out, classes)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"summary.csv", "results.json", "csl.png"}
    json.loads(before["results.json"])

    if stage == "json":
        def dumps_then_interrupt(obj, **kwargs):
            raise KeyboardInterrupt
        monkeypatch.setattr(report_module.json, "dumps", dumps_then_interrupt)
    else:
        def plot_then_interrupt(results, path, class_names, fmt=None):
            Path(path).write_bytes(b"\x89PNG partial")
            raise KeyboardInterrupt
        monkeypatch.setattr(report_module, "plot", plot_then_interrupt)
    results = _fake_results()
    results["seconds"] = 2.0
    with pytest.raises(KeyboardInterrupt):
        write_outputs(results, out, classes, force=True)
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before  # the whole previous set, not a mix of two runs
    assert _leftovers(tmp_path, {"csl"}) == []


# --- defect 13: strict edge lists, option ranges, broken pipes, full disks ----------------

@pytest.mark.parametrize("content, line, shown", [
    (b"smiles,label\nCCO,1\n", 1, "smiles,label"),
    (b"1 2\na b\n", 2, "a b"),
    (b"1 2\n2 3 4\n", 2, "2 3 4"),
    (b"1 2\n1.5 2\n", 2, "1.5 2"),
    (b"# ok\n1 2\n3 99999999999999999999\n", 3, "99999999999999999999"),
    (b"1 2\n\xff\xfe 3\n", 2, "UTF-8"),
])
def test_read_edge_list_rejects_lines_that_are_not_integer_pairs(content, line, shown, tmp_path, capsys):
    path = tmp_path / "g.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        read_edge_list(path)
    assert f"{path}:{line}:" in str(info.value) and shown in str(info.value)
    err = cli_fails(["subsets", str(path), "--k", "3", "--count"], capsys)
    assert err.startswith(f"rpfast subsets: error: {path}:{line}:")


def test_read_edge_list_keeps_comments_blank_lines_and_negative_ids(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# header\n\n  -5 7   # an edge\n7\t9\n\n11\n")
    batch, labels = read_edge_list(path)
    assert labels.tolist() == [-5, 7, 9, 11] and labels.dtype == np.int64
    assert batch.total_nodes == 4 and batch.edge_index.shape[1] == 4


@pytest.mark.parametrize("argv, message", [
    (["subsets", "{dir}", "--k", "2"], "is a directory"),
    (["subsets", "{graph}", "--k", str(2 ** 63)], "argument --k: must be <= 9223372036854775807"),
    (["subsets", "{graph}", "--k", "0"], "argument --k: must be >= 1, got 0"),
    (["subsets", "{graph}", "--k", "two"], "argument --k: must be an integer"),
    (["subsets", "{graph}", "--k", "2", "--chunk-size", "0"], "argument --chunk-size: must be >= 1"),
    (["csl", "--lr", "inf"], "lr must be positive and finite, got inf"),
    (["csl", "--lr", "nan"], "lr must be positive and finite, got nan"),
])
def test_bad_inputs_are_one_line_errors(argv, message, graph, tmp_path, capsys):
    argv = [a.replace("{graph}", str(graph)).replace("{dir}", str(tmp_path)) for a in argv]
    err = cli_fails(argv + ["--no-progress"], capsys)
    assert err.startswith(f"rpfast {argv[0]}: error: ") and message in err


@pytest.mark.parametrize("lr", [math.inf, -math.inf, math.nan])
def test_csl_config_rejects_non_finite_learning_rates(lr):
    with pytest.raises(ValueError, match="lr must be positive and finite"):
        CSLConfig(lr=lr).validate()


def _path_graph(tmp_path, n=400):
    """A path on n vertices: C(n, 2) 2-subsets, far more output than a pipe buffer holds."""
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{i} {i + 1}\n" for i in range(n - 1)))
    return path


def test_subsets_into_a_closed_pipe_exits_quietly(tmp_path):
    graph = _path_graph(tmp_path)
    script = (f'"{sys.executable}" -m rpfast subsets "{graph}" --k 2 --no-progress 2>"{tmp_path}/err" '
              f'| head -1; echo "status=${{PIPESTATUS[0]}}"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.splitlines() == ["0,1", "status=141"]
    err = (tmp_path / "err").read_text()
    assert "Traceback" not in err and "Exception ignored" not in err and err == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_subsets_to_a_full_disk_is_one_line_error(tmp_path):
    graph = _path_graph(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "rpfast", "subsets", str(graph), "--k", "2", "--no-progress"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr == "rpfast subsets: error: No space left on device\n"


# --- defect 15: importing a source tree that holds no compiled extension ----------------

def test_import_from_source_tree_without_extension_says_what_is_wrong(tmp_path):
    source = Path(rpfast.__file__).parent
    shutil.copytree(source, tmp_path / "rpfast",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    # Without the editable install's import hook (which would load the checkout instead),
    # as after a non-editable `pip install .` with Python started in the repository root.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if not type(f).__module__.startswith('_editable')]; import rpfast")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: the compiled extension rpfast._C is not in this source tree "
                           f"{tmp_path / 'rpfast'}")
    assert "pip install -e ." in last and "outside the source directory" in last


# --- issue defect 10: SIGTERM and SIGHUP clean up like Ctrl-C ------------------------------

# Runs the command line in a fresh interpreter after ``patch`` (Python source), so that a real
# signal reaches a real process at a chosen point.
_DRIVER = "import sys\n{patch}\nfrom rpfast.cli import main\nsys.exit(main({argv!r}))\n"

# ``rpfast subsets`` with a stream that pauses after each chunk: the output is being written
# (under its temporary name) for as long as the test likes.
_SLOW_STREAM = """
import time
import rpfast.experiments.subsets as tool
real = tool.iter_k_subsets
def slow(*args, **kwargs):
    stream = real(*args, **kwargs)
    class Slow:
        total = stream.total
        def __iter__(self):
            for chunk in stream:
                yield chunk
                time.sleep(0.05)
    return Slow()
tool.iter_k_subsets = slow
"""


def _start(patch, argv, cwd):
    return start_command([sys.executable, "-c", _DRIVER.format(patch=patch, argv=argv)], cwd=cwd)


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_subsets_signal_mid_write_removes_the_temporary(suffix, signum, tmp_path):
    graph = _path_graph(tmp_path, 60)  # 1770 rows, one per chunk: minutes at the pace of _SLOW_STREAM
    process = _start(_SLOW_STREAM, ["subsets", str(graph), "--k", "2", "--chunk-size", "1", "--no-progress",
                                    "--out", "s" + suffix], tmp_path)
    temporary = tmp_path / f".s{suffix}.tmp-{process.pid}"
    deadline = time.monotonic() + 120  # a hang guard, not a timing assertion
    while not temporary.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the output was never started"
        time.sleep(0.02)
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum
    assert err == f"rpfast subsets: terminated by {signal.Signals(signum).name}\n"
    assert _leftovers(tmp_path, {"g.txt"}) == []


def test_csl_sigterm_while_writing_keeps_the_previous_output_whole(tmp_path):
    """SIGTERM lands when the new figure is complete, just before the new directory would be
    renamed into place: the previous run's directory stays as it was, the temporary goes."""
    out = tmp_path / "csl"
    write_outputs(_fake_results(), out, [f"R={r}" for r in range(10)])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    patch = ("import os, signal, time\n"
             "import rpfast.experiments.report as report\n"
             "real = report.plot\n"
             "def plot(*args, **kwargs):\n"
             "    real(*args, **kwargs)\n"
             "    os.kill(os.getpid(), signal.SIGTERM)\n"
             "    time.sleep(60)\n"
             "report.plot = plot\n")
    process = _start(patch, ["csl", "--epochs", "1", "--folds", "2", "--hidden", "4", "--jobs", "1", "--threads", "1",
                             "--no-progress", "--force", "--out", str(out)], tmp_path)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 143 and err == "rpfast csl: terminated by SIGTERM\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _leftovers(tmp_path, {"csl"}) == []


def test_signal_handlers_are_restored_after_the_command(graph, capsys):
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    assert main(["subsets", str(graph), "--k", "2", "--count"]) == 0
    assert {signum: signal.getsignal(signum) for signum in before} == before


# --- issue defect 11: `rpfast csl --out` is one directory, written whole ---------------------

def _no_training(monkeypatch):
    monkeypatch.setattr(csl_module, "run_csl", lambda config, progress=True: _fake_results())


def test_csl_refuses_a_non_empty_out_before_training_unless_forced(tmp_path, capsys, monkeypatch):
    out = tmp_path / "csl"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def must_not_train(*args, **kwargs):
        raise AssertionError("trained before checking --out")

    monkeypatch.setattr(csl_module, "run_csl", must_not_train)
    err = cli_fails(["csl", "--no-progress", "--out", str(out)], capsys)
    assert err == f"rpfast csl: error: output directory {out} exists and is not empty; pass --force to replace it\n"
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    _no_training(monkeypatch)
    assert main(["csl", "--no-progress", "--force", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["csl.png", "results.json", "summary.csv"]  # replaced whole
    assert _leftovers(tmp_path, {"csl"}) == []
    capsys.readouterr()


def test_csl_writes_into_an_existing_empty_directory(tmp_path, capsys, monkeypatch):
    out = tmp_path / "csl"
    out.mkdir()
    _no_training(monkeypatch)
    assert main(["csl", "--no-progress", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["csl.png", "results.json", "summary.csv"]
    assert _leftovers(tmp_path, {"csl"}) == []
    capsys.readouterr()


def test_force_never_replaces_the_directory_the_command_runs_in(tmp_path, capsys, monkeypatch):
    (tmp_path / "keep.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    _no_training(monkeypatch)
    err = cli_fails(["csl", "--no-progress", "--force", "--out", "."], capsys)
    assert err == "rpfast csl: error: refusing to replace output directory .: it holds the current directory\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_subsets_out_that_is_a_directory_is_refused(graph, tmp_path, capsys):
    (tmp_path / "d.csv").mkdir()
    err = cli_fails(["subsets", str(graph), "--k", "2", "--force", "--out", str(tmp_path / "d.csv")], capsys)
    assert err == f"rpfast subsets: error: --out {tmp_path / 'd.csv'} is a directory, not a file\n"


def test_out_dot_in_an_empty_directory_writes_into_it(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _no_training(monkeypatch)
    assert main(["csl", "--no-progress", "--out", "."]) == 0
    assert Path.cwd() == work and work.is_dir()  # the directory the shell stands in stays
    assert sorted(p.name for p in work.iterdir()) == ["csl.png", "results.json", "summary.csv"]
    assert _leftovers(tmp_path, {"work"}) == []
    capsys.readouterr()


def test_outputs_follow_the_umask_like_any_file_the_user_writes(tmp_path):
    """Outputs are written under a temporary name and renamed: the temporary must be made as
    the final file would be (open(), mkdir()), not with mkstemp's private 0600 / 0700."""
    from rpfast._io import atomic_directory, atomic_path

    previous = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "file.txt") as tmp:
            tmp.write_text("x")
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "inner.json").write_text("{}")
            (tmp / "runs").mkdir()
    finally:
        os.umask(previous)
    assert (tmp_path / "file.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "out" / "inner.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "out").stat().st_mode & 0o777 == (tmp_path / "out" / "runs").stat().st_mode & 0o777 == 0o750
