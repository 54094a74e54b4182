"""``--device cpu|cuda|auto`` of the training commands, and ``rpfast info``'s GPU line."""
import pytest
import torch

from rpfast._config import build_config, show_config
from rpfast.cli import main
from rpfast.experiments.csl.experiment import CSLConfig
from rpfast.experiments.devices import check_device, resolve_device
from rpfast.experiments.molecules.train import MoleculesConfig
from rpfast.experiments.pairs.run import PairsConfig

pytestmark = pytest.mark.backend_neutral

NO_GPU = not torch.cuda.is_available()


def test_device_names():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be one of cpu, cuda, auto, got 'gpu'"):
        check_device("gpu")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_one_clear_error():
    with pytest.raises(ValueError, match="--device cuda: torch .* sees no CUDA device"):
        resolve_device("cuda")


@pytest.mark.parametrize("config", [
    lambda: CSLConfig(device="gpu"),
    lambda: MoleculesConfig(device="gpu"),
    lambda: PairsConfig(family="basic", device="gpu"),
])
def test_every_command_config_checks_its_device(config):
    with pytest.raises(ValueError, match="device must be one of"):
        config().validate()


def test_one_process_per_gpu():
    """A GPU trains in one process: --nproc above 1 is refused where auto means the GPU."""
    for config in (CSLConfig(device="auto", nproc=2), MoleculesConfig(device="auto", nproc=2)):
        if NO_GPU:
            config.validate()  # auto is the CPU here: processes share the runs as before
        else:
            with pytest.raises(ValueError, match="trains in one process: --nproc must be 1"):
                config.validate()


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("command", [["csl"], ["molecules"], ["pairs", "--family", "basic", "--count", "1"]])
def test_commands_refuse_cuda_without_a_gpu_in_one_line(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(command + ["--device", "cuda", "--out", str(tmp_path / "out"), "--no-progress"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sees no CUDA device" in err[0]
    assert not (tmp_path / "out").exists()


def test_csl_trains_on_the_device_it_is_given(tmp_path, capsys):
    """--device auto on this machine trains and writes its results (on the CPU without a GPU)."""
    out = tmp_path / "csl"
    assert main(["csl", "--epochs", "1", "--folds", "1", "--out", str(out), "--no-progress", "--threads", "1",
                 "--device", "auto"]) == 0
    assert (out / "results.json").is_file()


def test_info_names_the_gpus(capsys):
    show_config()
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("GPUs"))
    names = build_config()["gpus"]
    assert names == [] if NO_GPU else all(name in line for name in names)
    assert ("none" in line) == NO_GPU


def test_molecules_and_pairs_train_on_the_device_they_are_given(tmp_path, monkeypatch):
    """--device auto (the CPU here) gives the results of --device cpu, bit for bit."""
    import json

    from tests.helpers.tox21_files import write_tox21_subset

    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = write_tox21_subset(tmp_path / "tiny.csv", 160, {"A": 0, "B": 1, "C": 2}, smiles_header="SMILES")
    scores = []
    for device in ("cpu", "auto"):
        out = tmp_path / f"molecules-{device}"
        assert main(["molecules", "--data", str(data), "--model", "duvenaud", "--epochs", "1", "--splits", "1",
                     "--out", str(out), "--no-progress", "--threads", "1", "--device", device]) == 0
        scores.append([run["test_score"] for run in json.loads((out / "results.json").read_text())["runs"]])
        out = tmp_path / f"pairs-{device}"
        assert main(["pairs", "--family", "basic", "--count", "1", "--epochs", "2", "--out", str(out),
                     "--no-progress", "--jobs", "1", "--device", device]) == 0
        scores.append((out / "pairs.csv").read_text().splitlines()[1].split(",")[:8])
    assert scores[0] == scores[2] and scores[1] == scores[3]


def test_cuda_graphs_is_on_for_fixed_shapes_and_a_switch_elsewhere():
    """On by default where batch shapes repeat (csl, pairs), off for molecules; only a GPU in
    one process uses it."""
    from rpfast._options import config_from_args
    from rpfast.cli import build_parser
    from rpfast.experiments.devices import uses_cuda_graphs

    assert CSLConfig().cuda_graphs and PairsConfig(family="basic").cuda_graphs and not MoleculesConfig().cuda_graphs
    parser = build_parser()
    assert not config_from_args(CSLConfig, parser.parse_args(["csl", "--no-cuda-graphs"])).cuda_graphs
    assert config_from_args(MoleculesConfig, parser.parse_args(["molecules", "train", "--cuda-graphs"])).cuda_graphs
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert uses_cuda_graphs(True, cuda) and not uses_cuda_graphs(True, cpu)
    assert not uses_cuda_graphs(True, cuda, distributed=True) and not uses_cuda_graphs(False, cuda)
