"""``rpfast subsets``: enumerate or count the k-subsets of one graph, streaming the output."""
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
from tqdm.auto import tqdm

from rpfast.data.readers import graph_from_smiles, read_edge_list
from rpfast.ops.subsets import count_k_subsets, iter_k_subsets


def run_subsets(graph: str, k: int, prune: str = "none", smiles: bool = False, count: bool = False,
                out: str = "-", chunk_size: int = 1 << 20, progress: bool = True) -> int:
    """Enumerate (or count) and write; returns the number of subsets. Summary on stderr."""
    start = time.perf_counter()
    batch, labels = graph_from_smiles(graph) if smiles else read_edge_list(graph)
    n, m = batch.total_nodes, batch.undirected_csr()[1].numel() // 2
    if count:
        total = int(count_k_subsets(batch, k, prune)[0])
        print(total)
    else:
        stream = iter_k_subsets(batch, k, prune, chunk_size=chunk_size)
        total = stream.total
        with _writer(out, total, k, labels) as write, tqdm(total=total, unit="subset", unit_scale=True,
                                                            disable=not progress, file=sys.stderr) as bar:
            for chunk in stream:
                write(chunk.subsets.numpy())
                bar.update(len(chunk.subsets))
    elapsed = time.perf_counter() - start
    print(f"graph: {n} vertices, {m} edges; k={k}, prune={prune}: {total} subsets "
          f"in {elapsed:.2f} s", file=sys.stderr)
    return total


class _writer:
    """Context manager returning write(rows) for '-' (stdout), .csv or .npy outputs."""

    def __init__(self, out: str, total: int, k: int, labels: np.ndarray):
        self.out, self.total, self.k, self.labels = out, total, k, labels
        self.fh = None
        self.array: Optional[np.ndarray] = None
        self.row = 0

    def __enter__(self):
        if self.out == "-":
            self.fh = sys.stdout
        elif self.out.endswith(".csv"):
            self.fh = open(self.out, "w")
        elif self.out.endswith(".npy"):
            dtype = self.labels.dtype if self.labels.dtype.kind in "iu" else np.dtype(f"<U{max(map(len, self.labels), default=1)}")
            self.array = np.lib.format.open_memmap(self.out, mode="w+", dtype=dtype, shape=(self.total, self.k))
        else:
            raise ValueError(f"--out must be '-', a .csv or a .npy path, got {self.out!r}")
        return self.write

    def write(self, rows: np.ndarray) -> None:
        labelled = self.labels[rows]
        if self.array is not None:
            self.array[self.row:self.row + len(rows)] = labelled
            self.row += len(rows)
        else:
            np.savetxt(self.fh, labelled, fmt="%s", delimiter=",")

    def __exit__(self, *exc):
        if self.array is not None:
            self.array.flush()
            del self.array
        elif self.fh is not None and self.fh is not sys.stdout:
            self.fh.close()
        return False


