"""`rpfast pairs` (issue 29, first part): the RPC statistic against a direct computation, pair
files and families, the GIN control, the command's outputs and --resume."""
import csv
import re
import json
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from tests.helpers.assertions import cli_fails
from rpfast.cli import main
from rpfast.datasets.pair_families import family_pairs
from rpfast.datasets.pairs import read_pairs
from rpfast.experiments.pairs.statistics import THRESHOLD, hotelling_p_value, t_squared, verdict
from rpfast.experiments.pairs.protocol import PairsSettings, run_pair

pytestmark = pytest.mark.backend_neutral


def test_t_squared_matches_a_direct_computation():
    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 1.0, size=(32, 16))
    mean = d.mean(axis=0)
    centred = d - mean
    covariance = centred.T @ centred / (len(d) - 1)
    assert t_squared(d) == pytest.approx(mean @ np.linalg.inv(covariance) @ mean, rel=1e-9)
    assert t_squared(d, ridge=0.5) == pytest.approx(mean @ np.linalg.inv(covariance + 0.5 * np.eye(16)) @ mean,
                                                    rel=1e-9)
    from scipy.stats import f

    statistic = 32 * t_squared(d)
    assert hotelling_p_value(d) == pytest.approx(f.sf(statistic * 16 / (16 * 31), 16, 16), rel=1e-9)
    assert t_squared(np.zeros((32, 16))) == 0.0  # an exactly invariant model: S = 0, T2 = 0
    with pytest.raises(ValueError, match="finite"):
        t_squared(np.full((4, 2), np.nan))


def test_the_decision_rule():
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(32, 4))
    far = verdict(noise + 5.0, noise[::-1])
    assert far.t2 > THRESHOLD and far.distinguished and far.reliable
    same = verdict(noise + 5.0, noise + 5.0)  # the reliability statistic as large: not reliable
    assert not same.distinguished and not same.reliable


def _graph6(graph) -> str:
    return nx.to_graph6_bytes(graph, header=False).decode().strip()


def test_pair_files_are_read_and_every_problem_names_the_line(tmp_path):
    g, h = nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))
    path = tmp_path / "pairs.txt"
    path.write_text(f"# two triangles against a hexagon\n\nbasic {_graph6(g)}\t{_graph6(h)}\n{_graph6(h)} {_graph6(g)}\n")
    pairs = read_pairs(path)
    assert [(p.category, p.index, p.n) for p in pairs] == [("basic", 0, 6), ("pairs", 1, 6)]
    assert pairs[0].g.shape == (2, 12)
    for text, message in [
        (f"{_graph6(g)}\n", "expected [category] graph6 graph6, got 1 fields"),
        (f"basic {_graph6(g)} not-graph6!\n", "is not a graph6 string"),
        (f"{_graph6(g)} {_graph6(nx.path_graph(5))}\n", "have 6 and 5 vertices"),
        (f"{_graph6(g)} {_graph6(nx.relabel_nodes(g, {i: (i + 2) % 6 for i in range(6)}))}\n", "isomorphic"),
        ("# nothing\n", "no pair in the file"),
    ]:
        path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)) as info:
            read_pairs(path)
        assert str(path) in str(info.value)


@pytest.mark.parametrize("token, reason", [
    ("~~~", "it ends inside its vertex count ('~~' starts a count of 8 characters, it has 3)"),
    ("~??", "it ends inside its vertex count ('~' starts a count of 4 characters, it has 3)"),
    ("D?", "5 vertices need 2 characters of edges after the count, it has 1"),
    ("D?{{", "5 vertices need 2 characters of edges after the count, it has 3"),
    ("A", "2 vertices need 1 characters of edges after the count, it has 0"),
    (":Fa@x", "it is a sparse6 string, which starts with ':'; write the graph in graph6"),
    ("&D??", "it is a digraph6 string, which starts with '&'; pairs are of undirected graphs in graph6"),
    ("D?{\x7f", "the character '\\x7f' is outside graph6's range '?'..'~'"),
    ("D?é", "the character 'é' is outside graph6's range '?'..'~'"),
    (">>graph6<<", "it has no vertex count"),
])
def test_every_malformed_graph6_form_names_file_line_token_and_reason(tmp_path, capsys, token, reason):
    """The campaign's case: a truncated graph6 string gave 'error: list index out of range'."""
    path = tmp_path / "pairs.txt"
    path.write_text(f"basic D?{{ {token}\n", encoding="utf-8")
    message = cli_fails(["pairs", str(path), "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert message == f"rpfast pairs: error: {path}:1: {token!r} is not a graph6 string ({reason})\n"
    assert not (tmp_path / "o").exists()


def test_a_graph6_header_and_every_vertex_count_form_are_read():
    from rpfast.datasets.pairs import graph6_problem

    for graph in (nx.empty_graph(0), nx.empty_graph(1), nx.cycle_graph(62), nx.cycle_graph(63), nx.path_graph(300)):
        text = nx.to_graph6_bytes(graph, header=True).decode().strip()
        assert graph6_problem(text) is None and graph6_problem(text[len(">>graph6<<"):]) is None
        if graph.number_of_nodes() > 1:  # one edge character short
            assert "characters of edges after the count" in graph6_problem(text[:-1])


def test_an_unknown_category_is_reported_once_and_refused_with_strict(tmp_path, capsys):
    g, h = nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))
    path = tmp_path / "pairs.txt"
    path.write_text(f"bsic {_graph6(g)} {_graph6(h)}\nbsic {_graph6(h)} {_graph6(g)}\n"
                    f"Strongly-Regular {_graph6(g)} {_graph6(h)}\n4vtx {_graph6(g)} {_graph6(h)}\n")
    seen = []
    assert [p.category for p in read_pairs(path, warn=seen.append)] == ["bsic", "bsic", "Strongly-Regular", "4vtx"]
    assert seen == [f"warning: {path}:1: category 'bsic' has no published reference (known: pairs, basic, regular, "
                    "simple_regular, srg, strongly_regular, str, 4vtx, 4_vertex, 4_vertex_condition, dr, "
                    "distance_regular, extension, cfi, cfi_large, csl): a typo? It is scored as a category of its own."]
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: category 'bsic' has no published reference")):
        read_pairs(path, strict=True)
    message = cli_fails(["pairs", str(path), "--strict", "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert "--strict refuses it" in message and not (tmp_path / "o").exists()
    assert main(["pairs", str(path), "--count", "1", "--model", "gin", "--epochs", "1", "--jobs", "1", "--out",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    assert "category 'bsic' has no published reference" in capsys.readouterr().err


@pytest.mark.parametrize("category", ["../escape", "a/b", ".hidden", "a\\b"])
def test_a_category_that_is_a_path_is_refused(tmp_path, category):
    """A category names the pair's embedding files: it must not reach outside --out."""
    g, h = nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))
    path = tmp_path / "pairs.txt"
    path.write_text(f"{category} {_graph6(g)} {_graph6(h)}\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: category {category!r} must be a word of letters")):
        read_pairs(path)


@pytest.mark.filterwarnings("ignore:The hashes produced")
@pytest.mark.parametrize("family, count, expected", [("csl", None, 45), ("srg", 6, 6), ("regular", None, 20),
                                                     ("basic", 3, 3), ("cfi", 3, 3), ("4vtx", None, 2)])
def test_families_are_non_isomorphic_and_1wl_equivalent(family, count, expected):
    pairs = family_pairs(family, count)
    assert len(pairs) == expected and {p.category for p in pairs} == {family}
    for pair in pairs[:10]:
        g, h = (nx.Graph(list(map(tuple, e.t().tolist()))) for e in (pair.g, pair.h))
        assert g.number_of_nodes() == h.number_of_nodes() == pair.n
        assert nx.weisfeiler_lehman_graph_hash(g, iterations=pair.n) == nx.weisfeiler_lehman_graph_hash(
            h, iterations=pair.n)
        if pair.n <= 20:  # VF2 is slow on bigger regular graphs; check_pair certified those
            assert not nx.is_isomorphic(g, h)
    if family == "basic":
        assert all(len({d for _, d in nx.Graph(p.g.t().tolist()).degree}) > 1 for p in pairs)  # not regular
    if family == "srg":  # Shrikhande/rook, then T(8) against the three Chang graphs, then Latin square graphs
        assert [p.n for p in pairs] == [16, 28, 28, 28, 36, 49]


def test_srg_pairs_are_twenty_different_pairs():
    from rpfast.datasets.pairs import local_invariants, networkx_graph

    pairs = family_pairs("srg")
    keys = {tuple(sorted(tuple(local_invariants(networkx_graph(e, p.n))) for e in (p.g, p.h))) for p in pairs}
    assert len(pairs) == 20 and len(keys) == 20  # different invariants: no pair is another one again


def test_the_generalized_quadrangles_are_srg_40_12_2_4_and_differ_in_regular_points():
    from rpfast.datasets.pair_families import generalized_quadrangles

    symplectic, parabolic = generalized_quadrangles()
    for graph in (symplectic, parabolic):
        assert graph.number_of_nodes() == 40 and nx.intersection_array(graph) == ([12, 9], [1, 4])

    def span_sizes(graph):  # for non-adjacent x, y: the points adjacent to all of their 4 common neighbours
        x = 0
        sizes = set()
        for y in set(graph) - set(graph[x]) - {x}:
            common = set(graph[x]) & set(graph[y])
            sizes.add(sum(all(w in graph[v] for w in common) for v in graph))
        return sizes

    assert span_sizes(symplectic) == {4} and span_sizes(parabolic) == {2}  # W(3)'s points are regular


def test_wl_equivalence_and_the_isomorphism_checks_decide_correctly():
    from rpfast.datasets.pair_families import wl_equivalent
    from rpfast.datasets.pairs import isomorphic_within, local_invariants

    path, star = nx.path_graph(4), nx.star_graph(3)
    assert not wl_equivalent(path, star)
    hexagon, triangles = nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))
    assert wl_equivalent(hexagon, triangles) and isomorphic_within(hexagon, triangles, 5.0) is False
    assert local_invariants(hexagon) != local_invariants(triangles)  # triangles through each vertex
    assert isomorphic_within(hexagon, nx.relabel_nodes(hexagon, {i: 5 - i for i in range(6)}), 5.0) is True
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        isomorphic_within(hexagon, triangles, 0)


def test_latin_square_graphs_are_strongly_regular_and_checked():
    from rpfast.datasets.pair_families import latin_square_graph

    cyclic = [[(r + c) % 5 for c in range(5)] for r in range(5)]
    graph = latin_square_graph(cyclic)
    assert nx.is_strongly_regular(graph) and nx.intersection_array(graph) == ([12, 6], [1, 6])
    for bad in ([[0, 1], [0, 1]], [[0, 1, 2], [1, 2, 0]], [[0, 0], [1, 1]]):
        with pytest.raises(ValueError, match="must be a Latin square"):
            latin_square_graph(bad)


def test_written_pair_files_read_back(tmp_path):
    from rpfast.datasets.pairs import write_pairs

    pairs = family_pairs("regular", 2) + family_pairs("srg", 1)
    write_pairs(pairs, tmp_path / "mine.txt")
    again = read_pairs(tmp_path / "mine.txt")
    assert [(p.category, p.n) for p in again] == [("regular", 10), ("regular", 10), ("srg", 16)]
    for a, b in zip(pairs, again):
        assert nx.is_isomorphic(nx.Graph(a.g.t().tolist()), nx.Graph(b.g.t().tolist()))
    with pytest.raises(ValueError, match="category 'two words'"):
        write_pairs([again[0].__class__("two words", 0, 10, again[0].g, again[0].h)], tmp_path / "bad.txt")
    assert not (tmp_path / "bad.txt").exists()


def test_gin_is_the_negative_control_and_every_rp_model_separates():
    pairs = family_pairs("regular", 3)
    gin = [run_pair(p, 0, PairsSettings(model="gin", epochs=20)) for p in pairs]
    assert all(r["t2"] == 0.0 and not r["distinguished"] and r["reliable"] for r in gin)
    for model, steps in [("rp-gin", 100), ("oriented", 50)]:
        rp = [run_pair(p, 0, PairsSettings(model=model, epochs=steps, patience=steps, lr=1e-3, k=6)) for p in pairs]
        assert all(r["reliable"] for r in rp) and any(r["distinguished"] for r in rp), model
        assert all(r["t2"] > 10 * r["t2_reliability"] for r in rp), model
    kary = run_pair(pairs[0], 0, PairsSettings(model="kary", epochs=5, patience=5, lr=1e-3, k=4))
    assert kary["reliable"] and kary["differences"].shape == (32, 16)  # runs; random subsets learn little here


def test_the_default_model_separates_latin_square_graphs_whose_four_clique_counts_have_equal_means():
    from rpfast.datasets.pairs import networkx_graph

    pair = family_pairs("srg", 15)[14]  # two Latin square graphs of order 7, srg(49, 18, 7, 6)
    counts = []
    for edge_index in (pair.g, pair.h):
        graph = networkx_graph(edge_index, pair.n)
        counts.append(Counter(sum(nx.triangles(graph.subgraph(graph[v])).values()) // 3 for v in graph))
    assert counts[0] != counts[1]
    assert sum(c * k for c, k in counts[0].items()) == sum(c * k for c, k in counts[1].items())  # equal means
    result = run_pair(pair, 0, PairsSettings(epochs=100, patience=100, lr=1e-3))  # the command's defaults
    assert result["distinguished"] and result["reliable"]


def test_the_rooted_part_separates_a_cfi_pair_over_a_treewidth_2_base():
    from rpfast.datasets.pair_families import cfi_pair
    from rpfast.datasets.pairs import GraphPair, networkx_edge_index

    g, h = cfi_pair(nx.diamond_graph())
    pair = GraphPair("cfi", 0, 32, networkx_edge_index(g), networkx_edge_index(h))
    settings = dict(epochs=100, patience=100, lr=1e-3)  # the command's defaults
    result = run_pair(pair, 0, PairsSettings(**settings))
    assert result["distinguished"] and result["reliable"]
    views_only = run_pair(pair, 0, PairsSettings(**settings, output_dim=4))  # below 8 coordinates: no rooted part
    assert not views_only["distinguished"]


def test_two_roots_separate_the_4_vertex_condition_pair_that_the_views_do_not():
    pair = family_pairs("4vtx")[0]
    settings = dict(epochs=100, patience=100, lr=1e-3)  # the command's defaults
    result = run_pair(pair, 0, PairsSettings(**settings))
    assert result["distinguished"] and result["reliable"]
    views_only = run_pair(pair, 0, PairsSettings(**settings, output_dim=4))
    assert not views_only["distinguished"]


def test_the_walk_window_holds_the_start_and_its_neighbours():
    import torch

    from rpfast.experiments.pairs.models import WALK_WINDOW, build_model
    from rpfast.experiments.pairs.replicas import _max_degree

    def window(n, max_degree):
        views = build_model(PairsSettings(), n, max_degree=max_degree).parts[0]  # beside the rooted part
        return views.f.parts[0].window

    assert (window(30, 3), window(60, 40), window(30, None), window(12, 11)) == (4, 32, WALK_WINDOW, 12)
    with pytest.raises(ValueError, match="largest degree"):  # no graph on 12 vertices has degree 50
        window(12, 50)
    one_way = torch.tensor([[1, 2, 3, 0, 2], [0, 0, 0, 0, 1]])  # a star at 0, a self-loop, edge 1-2
    assert _max_degree(one_way, 5) == 3 and _max_degree(torch.cat([one_way, one_way.flip(0)], 1), 5) == 3
    assert _max_degree(torch.zeros(2, 0, dtype=torch.int64), 0) == 0


def _cycle_against_triangles():
    from rpfast.datasets.pairs import GraphPair, networkx_edge_index

    hexagon, triangles = nx.cycle_graph(6), nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))
    return GraphPair("cycles", 0, 6, networkx_edge_index(hexagon), networkx_edge_index(triangles))


def test_views_of_one_length_are_exact_on_cycles_and_random_lengths_keep_a_spread():
    pair = _cycle_against_triangles()  # every BFS view of C6 is one matrix, and every view of 2 C3
    # four output coordinates: the view parts alone (the rooted part, exact over the roots, takes
    # coordinates from eight on and separates this pair on its own)
    fixed = run_pair(pair, 0, PairsSettings(model="oriented", epochs=30, patience=30, lr=1e-3, min_k=6, output_dim=4))
    assert fixed["t2"] == 0.0 and np.abs(fixed["differences"].mean(axis=0)).max() > 0.01  # S = 0: T2 = 0
    varied = run_pair(pair, 0, PairsSettings(model="oriented", epochs=30, patience=30, lr=1e-3))
    assert varied["distinguished"] and varied["reliable"]


def test_exact_runs_with_a_ridge_only():
    pair = _cycle_against_triangles()
    with pytest.raises(ValueError, match="give --ridge EPS"):
        PairsSettings(model="exact").validate()
    result = run_pair(pair, 0, PairsSettings(model="exact", epochs=10, patience=10, lr=1e-3, ridge=1e-6))
    assert result["distinguished"] and result["t2_reliability"] < 1e-6  # deterministic: D rows equal up to rounding
    from rpfast.experiments.pairs.models import check_graph_sizes

    assert check_graph_sizes("exact", [6, 7]) is None and check_graph_sizes("oriented", [200]) is None
    assert "visits each of the 1,500 vertices as a root" in check_graph_sizes("oriented", [10, 1500])
    assert "3,628,800 orders" in check_graph_sizes("exact", [10])
    with pytest.raises(ValueError, match="a pair on 12 vertices is above its 11"):
        check_graph_sizes("exact", [6, 12])
    with pytest.raises(ValueError, match="min_k must be an integer from 1 to k = 32"):
        PairsSettings(min_k=40).validate()


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_pairs_command_streams_rows_saves_embeddings_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["pairs", "--family", "regular", "--model", "gin", "--epochs", "3", "--out", str(out), "--no-progress",
            "--save-embeddings"]
    assert main(argv + ["--count", "2"]) == 0
    assert "total                 2              0           0       0" in capsys.readouterr().out
    rows = {r["index"]: r for r in _rows(out / "pairs.csv")}  # in the order the workers finished them
    assert sorted(rows) == ["0", "1"] and set(rows["0"]) >= {"category", "distinguished", "reliable"}
    saved = np.load(out / "embeddings" / "regular_1_seed0.npz")
    assert t_squared(saved["differences"]) == float(rows["1"]["t2"])
    assert (out / "scores.png").stat().st_size > 10_000
    assert json.loads((out / "summary.json").read_text())["scores"]["total"]["pairs"] == 2

    # an interrupted run: a row cut short is dropped, the rest continues
    text = (out / "pairs.csv").read_text()
    (out / "pairs.csv").write_text(text + "regular,2,10,0,0.0")
    assert cli_fails(argv + ["--count", "3"], capsys).startswith("rpfast pairs: error: output directory")
    err = cli_fails(argv + ["--count", "3", "--resume", "--epochs", "4"], capsys)
    assert "used other options (count, epochs)" in err
    config = json.loads((out / "config.json").read_text())
    config["count"] = 3
    (out / "config.json").write_text(json.dumps(config))
    assert main(argv + ["--count", "3", "--resume"]) == 0
    assert sorted(r["index"] for r in _rows(out / "pairs.csv")) == ["0", "1", "2"]


def test_pairs_command_exports_a_family_as_a_pair_file(tmp_path, capsys):
    path = tmp_path / "mine.txt"
    assert main(["pairs", "--family", "all", "--count", "1", "--export", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 8 pairs to {path}"
    assert [p.category for p in read_pairs(path)] == ["basic", "regular", "srg", "4vtx", "csl", "cfi", "cfi_large",
                                                      "dr"]
    assert "exists: use --force" in cli_fails(["pairs", "--family", "srg", "--export", str(path)], capsys)
    assert cli_fails(["pairs", "--family", "srg", "--export", str(tmp_path), "--force"], capsys) == \
        f"rpfast pairs: error: --export {tmp_path} is a directory; name a pair file\n"
    missing = tmp_path / "no" / "such" / "x.txt"
    assert cli_fails(["pairs", "--family", "srg", "--export", str(missing)], capsys) == \
        f"rpfast pairs: error: the directory of --export {missing} does not exist\n"


@pytest.mark.parametrize("argv, message", [
    ([], "name a pair file or a --family"),
    (["no/such/file.txt"], "does not exist"),
    (["--family", "csl", "--model", "mlp"], "invalid choice: 'mlp'"),
])
def test_pairs_command_errors_are_one_line(argv, message, tmp_path, capsys):
    assert message in cli_fails(["pairs", *argv, "--out", str(tmp_path / "o"), "--no-progress"], capsys)


def test_cfi_pairs_differ_only_by_the_twist():
    from rpfast.datasets.pair_families import cfi_pair

    g, h = cfi_pair(nx.complete_graph(4))
    assert g.number_of_nodes() == h.number_of_nodes() == 40  # 4 gadgets of 4 middle + 6 end vertices
    assert len(set(g.edges) ^ set(h.edges)) == 4  # one base edge's two links, crossed
    assert sorted(d for _, d in g.degree) == sorted(d for _, d in h.degree)
    with pytest.raises(ValueError, match="connected"):
        cfi_pair(nx.empty_graph(3))


def test_worker_processes_give_the_rows_of_one_process(tmp_path, capsys):
    argv = ["pairs", "--family", "regular", "--count", "3", "--eval-samples", "8", "--epochs", "3", "--no-progress",
            "--save-embeddings"]
    # one thread per process in both runs: torch's matrix products round differently by thread count,
    # which moves T2 of a pair with near-deterministic coordinates
    assert main(argv + ["--jobs", "1", "--threads", "1", "--out", str(tmp_path / "one")]) == 0
    assert main(argv + ["--jobs", "2", "--threads", "2", "--out", str(tmp_path / "two")]) == 0
    one, two = _rows(tmp_path / "one" / "pairs.csv"), _rows(tmp_path / "two" / "pairs.csv")
    assert sorted(r["index"] for r in two) == ["0", "1", "2"]  # streamed as the workers finish them
    by_index = {r["index"]: r for r in two}
    for row in one:
        assert [by_index[row["index"]][key] for key in ("t2", "t2_reliability", "distinguished", "reliable")] == \
            [row["t2"], row["t2_reliability"], row["distinguished"], row["reliable"]]
        for part in ("differences", "reliability"):
            key = f"regular_{row['index']}_seed0"
            np.testing.assert_array_equal(np.load(tmp_path / "two" / "embeddings" / f"{key}.npz")[part],
                                          np.load(tmp_path / "one" / "embeddings" / f"{key}.npz")[part])


HEADER = "category,index,n,seed,t2,t2_reliability,p_value,distinguished,reliable,epochs,final_loss,seconds"


def test_pairs_csv_holds_its_header_before_any_pair_finishes(tmp_path, monkeypatch, capsys):
    """The campaign's kill -9 left a 0-byte pairs.csv (the header sat in a buffer until the
    first row): the file now exists with its header before the first pair runs."""
    import rpfast.experiments.pairs.run as pairs_run

    out = tmp_path / "out"
    seen = []

    def first_pair(*args, **kwargs):
        seen.append((out / "pairs.csv").read_text())
        raise KeyboardInterrupt

    monkeypatch.setattr(pairs_run, "run_pair", first_pair)
    with pytest.raises(SystemExit):
        main(["pairs", "--family", "regular", "--count", "1", "--model", "gin", "--jobs", "1", "--out", str(out),
              "--no-progress"])
    assert seen == [HEADER + "\n"]
    capsys.readouterr()


def _finished_run(tmp_path, count=2):
    out = tmp_path / "out"
    argv = ["pairs", "--family", "regular", "--model", "gin", "--epochs", "2", "--count", str(count), "--jobs", "1",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    return out, argv


def test_resume_repairs_a_missing_header_and_runs_a_pair_cut_short(tmp_path, capsys):
    out, argv = _finished_run(tmp_path)
    lines = (out / "pairs.csv").read_text().splitlines(keepends=True)
    (out / "pairs.csv").write_text(lines[1] + lines[2][:15])  # no header (an earlier rpfast), a row cut short
    assert main(argv + ["--resume"]) == 0
    text = (out / "pairs.csv").read_text()
    assert text.startswith(HEADER + "\n") and text.count(HEADER) == 1
    assert sorted(r["index"] for r in _rows(out / "pairs.csv")) == ["0", "1"]
    capsys.readouterr()


@pytest.mark.parametrize("damage, message", [
    (lambda text: "hello,world\n" + text, r"pairs.csv:1: not the header of rpfast pairs' pairs.csv"),
    (lambda text: text.replace(",True,", ",maybe,", 1).replace(",False,", ",maybe,", 1),
     r"pairs.csv:2: distinguished 'maybe' is not True or False"),
    (lambda text: text + "regular,1,10\n", r"pairs.csv:4: expected 12 fields"),
    (lambda text: text.split("\n", 1)[1].replace(",True,", ",maybe,", 1).replace(",False,", ",maybe,", 1),
     r"pairs.csv:2: distinguished 'maybe' is not True or False"),  # no header either: nothing repaired
    (lambda text: text + text.splitlines(keepends=True)[1], r"has a row for regular pair \d seed 0 twice"),
    (lambda text: text + text.splitlines(keepends=True)[1].replace("regular,", "basic,", 1),
     r"has a row for basic pair \d seed 0 but this run has no such pair"),
    (lambda text: text.replace(text.splitlines()[1].split(",")[4], "x", 1), r"pairs.csv:2: could not convert"),
])
def test_resume_refuses_a_damaged_pairs_csv_in_one_line(tmp_path, capsys, damage, message):
    out, argv = _finished_run(tmp_path)
    (out / "pairs.csv").write_text(damage((out / "pairs.csv").read_text()))
    before = (out / "pairs.csv").read_text()
    assert re.search(message, cli_fails(argv + ["--resume"], capsys))
    assert (out / "pairs.csv").read_text() == before


def test_a_pair_whose_loss_turns_nan_keeps_its_last_finite_weights(monkeypatch, capsys):
    import torch

    import rpfast.experiments.pairs.protocol as pairs_module

    calls = []

    class NanFromThird(torch.nn.CosineEmbeddingLoss):
        def forward(self, a, b, target):
            calls.append(1)
            value = super().forward(a, b, target)
            return value * float("nan") if len(calls) >= 3 else value

    monkeypatch.setattr(pairs_module.torch.nn, "CosineEmbeddingLoss", NanFromThird)
    pair = family_pairs("regular", 1)[0]
    row = run_pair(pair, 0, PairsSettings(model="rp-gin", epochs=10, patience=10))  # the sequential path
    assert row["epochs"] == 2 and np.isfinite(row["final_loss"]) and np.isfinite(row["t2"])
    assert np.isfinite(row["differences"]).all()

    # embeddings that are not finite: not distinguished, no false claim, a warning
    real_embed = pairs_module._embed
    monkeypatch.setattr(pairs_module, "_embed", lambda model, graph: real_embed(model, graph) * float("nan"))
    row = run_pair(pair, 0, PairsSettings(model="rp-gin", epochs=2, patience=2))
    assert not row["distinguished"] and row["reliable"] and np.isnan(row["t2"])
    assert "regular pair 0, seed 0: the model's embeddings are not finite" in capsys.readouterr().err


@pytest.mark.skipif(not __import__("os").path.isdir("/proc"), reason="finds the worker processes in /proc")
def test_sigterm_and_kill_9_during_pairs_leave_whole_rows_under_one_header_and_resume(tmp_path):
    """SIGTERM: the workers stop, one line, no temporary, whole rows. Then the campaign's kill -9
    repro on the resumed run: the file keeps its one header, and --resume finishes every pair."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers.processes import alive, children

    pairs = tmp_path / "f.txt"
    assert main(["pairs", "--family", "basic", "--count", "5", "--export", str(pairs)]) == 0
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "rpfast", "pairs", str(pairs), "--model", "gin", "--epochs", "100", "--patience",
            "100", "--jobs", "2", "--threads", "2", "--out", str(out), "--no-progress"]

    def start_and_wait_for_rows(command, rows):
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline, workers = time.monotonic() + 120, []  # a hang guard, not a timing assertion
        while time.monotonic() < deadline and process.poll() is None:
            workers = sorted(set(workers) | set(children(process.pid)))
            if (out / "pairs.csv").is_file() and len((out / "pairs.csv").read_text().splitlines()) >= 1 + rows:
                break
            time.sleep(0.02)
        return process, workers

    process, workers = start_and_wait_for_rows(argv, 1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143 and err == "rpfast pairs: terminated by SIGTERM\n", err
    time.sleep(0.2)
    assert workers and not [w for w in workers if alive(w)], "worker processes left running"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "pairs.csv"]  # no temporary, no summary
    lines = (out / "pairs.csv").read_text().splitlines()
    assert lines[0] == HEADER and len(lines) >= 2 and all(len(line.split(",")) == 12 for line in lines[1:])

    process, _ = start_and_wait_for_rows(argv + ["--resume"], len(lines))
    process.kill()
    process.communicate()
    for worker in children(process.pid):
        __import__("os").kill(worker, signal.SIGKILL)
    assert (out / "pairs.csv").read_text().startswith(HEADER + "\n")
    resumed = subprocess.run(argv + ["--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    lines = (out / "pairs.csv").read_text().splitlines()
    assert lines.count(HEADER) == 1 and sorted(int(r["index"]) for r in _rows(out / "pairs.csv")) == list(range(5))

