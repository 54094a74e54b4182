"""Pairs of non-isomorphic graphs that the 1-WL test cannot tell apart: the input of
``rpfast pairs`` (the RPC protocol of the BREC benchmark).

A pair file holds one pair per line: an optional category label, then two graph6 strings,
separated by tabs or spaces; ``#`` starts a comment and blank lines are skipped
(:func:`read_pairs`, :func:`write_pairs`). Built-in families are in
:mod:`rpfast.datasets.pair_families`. A category is a word of letters, digits and ``_ - . +`` (it
names files, so never a path); one outside :data:`KNOWN_CATEGORIES` (a typo, most likely) is
reported, or refused with ``strict``.

Graph6 parsing is networkx's, after a check of the string's form (:func:`graph6_problem`) that
names what is wrong with a malformed one. Every pair is checked (:func:`check_pair`): equal vertex counts,
and non-isomorphic: certainly when cheap local invariants differ, else by networkx's VF2++ up
to :data:`ISOMORPHISM_CHECK_MAX` vertices and :data:`ISOMORPHISM_CHECK_SECONDS` per pair (the
search costs exponential time on some regular and CFI graphs; such pairs are taken as given).
"""
import re
import signal
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import torch
from torch import Tensor

from rpfast._io import atomic_path, read_text

__all__ = ["GraphPair", "read_pairs", "write_pairs", "check_pair", "check_category", "graph6_problem",
           "networkx_graph", "networkx_edge_index", "local_invariants", "isomorphic_within", "KNOWN_CATEGORIES",
           "ISOMORPHISM_CHECK_MAX", "ISOMORPHISM_CHECK_SECONDS"]

#: Pairs of at most this many vertices are checked for isomorphism ...
ISOMORPHISM_CHECK_MAX = 64
#: ... for at most this many seconds each.
ISOMORPHISM_CHECK_SECONDS = 1.0

#: The categories with a published reference: rpfast's families (:mod:`rpfast.datasets.pair_families`)
#: and BREC's categories, compared ignoring case with ``-`` and spaces read as ``_``; ``pairs`` is
#: the category of an unlabelled line.
KNOWN_CATEGORIES = ("pairs", "basic", "regular", "simple_regular", "srg", "strongly_regular", "str", "4vtx",
                    "4_vertex", "4_vertex_condition", "dr", "distance_regular", "extension", "cfi", "cfi_large", "csl")
_CATEGORY = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")
_GRAPH6_HEADER = ">>graph6<<"


@dataclass(frozen=True)
class GraphPair:
    """Two graphs on ``n`` vertices: ``g`` and ``h`` are ``edge_index [2, 2E]`` (both directions
    of every undirected edge, int64); ``category`` names the family or the file's label,
    ``index`` the pair's position (from 0) and ``where`` its origin (``file:line``)."""

    category: str
    index: int
    n: int
    g: Tensor
    h: Tensor
    where: str = ""


def networkx_edge_index(graph) -> Tensor:
    """A networkx graph on nodes ``0..n-1`` as ``edge_index [2, 2E]``."""
    edges = torch.tensor(list(graph.edges()), dtype=torch.int64).reshape(-1, 2).t()
    return torch.cat([edges, edges.flip(0)], dim=1)


def networkx_graph(edge_index: Tensor, n: int):
    """The networkx graph on nodes ``0..n-1`` with the edges of ``edge_index [2, E]``."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edge_index.t().tolist())
    return graph


def local_invariants(graph) -> List:
    """An isomorphism invariant of a networkx graph, cheap on the regular graphs VF2++ finds
    hardest: the sorted multiset, over vertices, of (degree, edges among the neighbours,
    triangles among the neighbours = 4-cliques through the vertex)."""
    import networkx as nx

    rows = []
    for v in graph:
        local = graph.subgraph(graph[v])
        rows.append((graph.degree[v], local.number_of_edges(), sum(nx.triangles(local).values()) // 3))
    return sorted(rows)


class _SearchTimeout(Exception):
    pass


def isomorphic_within(g, h, seconds: float) -> Optional[bool]:
    """VF2++'s answer for networkx graphs g and h, or None when the search takes more than
    ``seconds`` (some non-isomorphic pairs, CFI graphs above all, cost it exponential time).
    The budget needs the main thread (a timer signal); elsewhere the search runs to the end."""
    import networkx as nx

    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return nx.vf2pp_is_isomorphic(g, h)

    def stop(signum, frame):
        raise _SearchTimeout

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return nx.vf2pp_is_isomorphic(g, h)
    except _SearchTimeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_pair(pair: GraphPair) -> GraphPair:
    """``pair`` if it is a valid pair, else ValueError naming it (sizes, isomorphism). Graphs
    whose :func:`local_invariants` differ are non-isomorphic; otherwise, up to
    :data:`ISOMORPHISM_CHECK_MAX` vertices, VF2++ decides within
    :data:`ISOMORPHISM_CHECK_SECONDS` (a pair it cannot decide in time is taken as given; the
    RPC protocol's reliability check still guards the score)."""
    name = pair.where or f"{pair.category} pair {pair.index}"
    if pair.n < 1:
        raise ValueError(f"{name}: the graphs have no vertex")
    if pair.n <= ISOMORPHISM_CHECK_MAX:
        g, h = networkx_graph(pair.g, pair.n), networkx_graph(pair.h, pair.n)
        if local_invariants(g) == local_invariants(h) and isomorphic_within(g, h, ISOMORPHISM_CHECK_SECONDS):
            raise ValueError(f"{name}: the two graphs are isomorphic, so no model can (or should) tell them apart")
    return pair


def check_category(category: str, where: str = "category") -> str:
    """``category`` if it can name a pair's files (a word of letters, digits and ``_ - . +``, not
    starting with ``.``), else a ValueError naming ``where``."""
    if not isinstance(category, str) or not _CATEGORY.fullmatch(category):
        raise ValueError(f"{where}: category {category!r} must be a word of letters, digits and '_', '-', '.', '+' "
                         "(not starting with '.'): it names the pair's output files")
    return category


def _known(category: str) -> bool:
    return category.lower().replace("-", "_").replace(" ", "_") in KNOWN_CATEGORIES


def graph6_problem(text: str) -> Optional[str]:
    """What makes ``text`` not a graph6 string (a phrase), or None when its form is valid: an
    optional ``>>graph6<<`` header, the vertex count n (one character, or ``~`` and three, or
    ``~~`` and six) and ceil(n (n - 1) / 12) characters of edges, every character in ``?``..``~``."""
    body = text[len(_GRAPH6_HEADER):] if text.startswith(_GRAPH6_HEADER) else text
    if body.startswith(":") or body.startswith(">>sparse6<<"):
        return "it is a sparse6 string, which starts with ':'; write the graph in graph6"
    if body.startswith("&") or body.startswith(">>digraph6<<"):
        return "it is a digraph6 string, which starts with '&'; pairs are of undirected graphs in graph6"
    bad = next((c for c in body if not 63 <= ord(c) <= 126), None)
    if bad is not None:
        return f"the character {bad!r} is outside graph6's range '?'..'~'"
    if not body:
        return "it has no vertex count"
    codes = [ord(c) - 63 for c in body]
    if codes[0] < 63:
        n, head = codes[0], 1
    else:
        head = 4 if len(codes) < 2 or codes[1] < 63 else 8
        if len(codes) < head:
            return (f"it ends inside its vertex count ('{'~' * (head // 4)}' starts a count of {head} characters, "
                    f"it has {len(codes)})")
        n = 0
        for code in codes[head - (3 if head == 4 else 6):head]:
            n = (n << 6) | code
    needed = (n * (n - 1) // 2 + 5) // 6
    if len(codes) - head != needed:
        return f"{n} vertices need {needed} characters of edges after the count, it has {len(codes) - head}"
    return None


def read_pairs(path, strict: bool = False, warn: Optional[Callable[[str], None]] = None) -> List[GraphPair]:
    """The pairs of a pair file (see the module docstring). Every problem is a ValueError
    naming the file and the line: a line without two graphs, a malformed graph6 string (what is
    wrong with it), graphs of different sizes, an isomorphic pair, a category that cannot name
    files; an empty file or one with no pair too. A category outside :data:`KNOWN_CATEGORIES`
    is a ValueError with ``strict``, else reported once, at its first line, through ``warn``
    (default: :func:`warnings.warn`)."""
    import networkx as nx

    path = Path(path)
    text = read_text(path, "pair file", "graph6 pairs")
    pairs: List[GraphPair] = []
    unknown = set()
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{path}:{number}"
        if len(fields) not in (2, 3):
            raise ValueError(f"{where}: expected [category] graph6 graph6, got {len(fields)} fields")
        category = check_category(fields[0], where) if len(fields) == 3 else "pairs"
        if not _known(category) and category not in unknown:
            message = (f"{where}: category {category!r} has no published reference (known: "
                       f"{', '.join(KNOWN_CATEGORIES)}): a typo?")
            if strict:
                raise ValueError(message + " (--strict refuses it)")
            unknown.add(category)
            (warn or (lambda text: warnings.warn(text, stacklevel=3)))(
                f"warning: {message} It is scored as a category of its own.")
        graphs = []
        for text6 in fields[-2:]:
            shown = text6 if len(text6) <= 30 else text6[:27] + "..."
            problem = graph6_problem(text6)
            if problem is not None:
                raise ValueError(f"{where}: {shown!r} is not a graph6 string ({problem})")
            try:
                graphs.append(nx.from_graph6_bytes(text6.encode("ascii")))
            except (ValueError, IndexError, UnicodeEncodeError, nx.NetworkXError) as error:
                raise ValueError(f"{where}: {shown!r} is not a graph6 string ({error})") from None
        g, h = graphs
        if g.number_of_nodes() != h.number_of_nodes():
            raise ValueError(f"{where}: the graphs have {g.number_of_nodes()} and {h.number_of_nodes()} vertices; "
                             "a pair must be of one size")
        pairs.append(check_pair(GraphPair(category, len(pairs), g.number_of_nodes(), networkx_edge_index(g),
                                          networkx_edge_index(h), where)))
    if not pairs:
        raise ValueError(f"{path}: no pair in the file (one per line: [category] graph6 graph6)")
    return pairs


def write_pairs(pairs: List[GraphPair], path) -> None:
    """Write ``pairs`` as a pair file (``category graph6 graph6`` per line; the file appears
    whole or not at all), which :func:`read_pairs` reads back."""
    import networkx as nx

    lines = []
    for pair in pairs:
        if not isinstance(pair, GraphPair):
            raise TypeError(f"pairs must hold GraphPair objects, got {type(pair).__name__}")
        check_category(pair.category, f"{pair.category} pair {pair.index}")
        codes = [nx.to_graph6_bytes(networkx_graph(e, pair.n), header=False).decode("ascii").strip()
                 for e in (pair.g, pair.h)]
        lines.append(" ".join([pair.category, *codes]))
    with atomic_path(path) as tmp:
        Path(tmp).write_text("\n".join(lines) + "\n")
