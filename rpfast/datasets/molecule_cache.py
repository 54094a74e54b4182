"""The featurisation cache: a data set's :class:`~rpfast.datasets.molecule_graphs.MoleculeGraphs`
codes written once to disk and memory-mapped on later runs (:func:`featurize_dataset`).

A cache file is a ``torch.save`` zip of the stored codes (:data:`CACHE_FORMAT`), the featuriser's
settings, a hash of the SMILES list and a SHA-256 over everything it holds. A file is used only
when every check passes; otherwise a ``RuntimeWarning`` says why and the molecules are featurised
again (:func:`_cache_problem` lists the checks).
"""
import hashlib
import json
import os
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

from rpfast._io import atomic_path
from rpfast.datasets.moleculenet import MoleculeDataset
from rpfast.datasets.molecule_graphs import ATOM_CODES, BOND_CODES, CODE_DTYPE
from rpfast.datasets.molecules import (ELEMENTS, FEATURIZER_VERSION, MoleculeGraphs, atom_count_bounds, featurize_smiles,
                                       featurizer_settings)

__all__ = ["featurize_dataset", "cached_graphs", "store_graphs", "cache_path", "default_cache_dir", "CACHE_FORMAT"]


def default_cache_dir() -> Path:
    """``$RPFAST_CACHE``, else ``$XDG_CACHE_HOME/rpfast``, else ``~/.cache/rpfast``."""
    if os.environ.get("RPFAST_CACHE"):
        return Path(os.environ["RPFAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rpfast"


#: The cache file's layout; a file of another layout (older rpfast) is featurised again.
CACHE_FORMAT = "rpfast-featurised-molecules/3"
#: the stored tensors (MoleculeGraphs' codes; its SMILES are the data set's at its rows): dtype, shape
#: with N atoms, B bonds, M molecules
_TENSORS = {"atoms": (CODE_DTYPE, ("N", len(ATOM_CODES))), "bonds": (CODE_DTYPE, ("B", len(BOND_CODES))),
            "pairs": (torch.int32, ("B", 2)), "atom_ptr": (torch.int64, ("M+1",)), "bond_ptr": (torch.int64, ("M+1",)),
            "rows": (torch.int64, ("M",)), "atom_counts": (torch.int64, ("M",))}
#: what the cache stores of a MoleculeGraphs (its smiles are the data set's at its rows)
_STORED = tuple(k for k in MoleculeGraphs.STATE if k != "smiles")


def _smiles_digest(smiles: Sequence[str]) -> str:
    """SHA-256 of a SMILES list, each string length-prefixed (no two lists share an encoding)."""
    digest = hashlib.sha256(len(smiles).to_bytes(8, "little"))
    for item in smiles:
        data = item.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _content_digest(record: dict) -> str:
    """SHA-256 over everything a cache record holds but this digest: each array's name, dtype,
    shape and bytes, and the lists and settings as JSON."""
    digest = hashlib.sha256()
    for name in sorted(record):
        if name == "content_sha256":
            continue
        value = record[name]
        digest.update(name.encode())
        if isinstance(value, torch.Tensor):
            digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
            digest.update(value.detach().contiguous().numpy().reshape(-1).view(np.uint8))  # no copy
        else:
            digest.update(json.dumps(value, sort_keys=True).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _cache_record(graphs: MoleculeGraphs, smiles: Sequence[str], settings: dict) -> dict:
    stored = {k: v for k, v in graphs.state().items() if k in _STORED}
    record = dict(stored, format=CACHE_FORMAT, featurizer=settings, smiles_sha256=_smiles_digest(smiles),
                  num_smiles=len(smiles), atom_counts=graphs.atom_ptr.diff())
    record["content_sha256"] = _content_digest(record)
    return record


def _cache_problem(record, smiles: Sequence[str], settings: dict) -> Optional[str]:
    """Why ``record`` (a loaded cache file) is not the featurisation of ``smiles`` by the featuriser
    ``settings`` describe, or None when every check passes: the format, the settings, the SMILES
    list, a content hash over every stored value (bit flips, edited arrays), the structure (shapes,
    offsets, rows), the atom counts against RDKit's parse of the SMILES, and the element and degree
    one-hot blocks against ``element`` and the bonds."""
    if not isinstance(record, dict) or record.get("format") != CACHE_FORMAT:
        found = record.get("format") if isinstance(record, dict) else None
        return (f"it has format {found!r}, not {CACHE_FORMAT!r} (written by another rpfast version, or not a "
                f"featurisation cache)")
    stored = record.get("featurizer")
    if stored != settings:
        if not isinstance(stored, dict):
            return f"its featuriser settings are {type(stored).__name__}, not a dict"
        differ = sorted(set(stored) | set(settings), key=str)
        shown = "; ".join(f"{key} {stored.get(key)!r}, now {settings.get(key)!r}" for key in differ
                          if stored.get(key) != settings.get(key))
        return f"it was featurised with other settings ({shown[:300]})"
    if record.get("num_smiles") != len(smiles) or record.get("smiles_sha256") != _smiles_digest(smiles):
        return (f"it holds the features of other SMILES ({record.get('num_smiles')!r} molecules with another "
                f"hash, this data set {len(smiles)}: another data set's cache under this name?)")
    for name, (dtype, shape) in _TENSORS.items():
        value = record.get(name)
        if not (isinstance(value, torch.Tensor) and value.dtype == dtype and value.dim() == len(shape)
                and value.layout == torch.strided):
            shown = (f"{value.dtype} of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor)
                     else type(value).__name__)
            return f"its {name} is {shown}, not a {len(shape)}-D {dtype} tensor"
    invalid = record.get("invalid")
    if not (isinstance(invalid, list) and all(type(i) is int for i in invalid)):
        return "its invalid entry is not a list of ints"
    if record.get("content_sha256") != _content_digest(record):
        return "its content hash does not match what it holds (damaged: bit flips or edited values)"
    problem = _structure_problem(record, smiles, invalid)
    if problem is not None:
        return problem
    return _feature_problem(record, smiles)


def _structure_problem(record: dict, smiles: Sequence[str], invalid: list) -> Optional[str]:
    atom_ptr, bond_ptr, rows, counts = (record[k] for k in ("atom_ptr", "bond_ptr", "rows", "atom_counts"))
    sizes = {"N": record["atoms"].shape[0], "B": record["bonds"].shape[0], "M": rows.numel()}
    sizes["M+1"] = sizes["M"] + 1
    for name, (_, shape) in _TENSORS.items():
        expected = tuple(sizes[d] if isinstance(d, str) else d for d in shape)
        if tuple(record[name].shape) != expected:
            return f"its {name} has shape {tuple(record[name].shape)}, expected {expected}"
    for name, ptr, total in (("atom_ptr", atom_ptr, sizes["N"]), ("bond_ptr", bond_ptr, sizes["B"])):
        if int(ptr[0]) != 0 or int(ptr[-1]) != total or bool((ptr.diff() < 0).any()):
            return f"its {name} does not run from 0 up to {total}"
    if not torch.equal(counts, atom_ptr.diff()):
        return "its atom counts disagree with its offsets"
    if sorted(rows.tolist() + invalid) != list(range(len(smiles))) or bool((rows.diff() <= 0).any()) \
            or invalid != sorted(invalid):
        return "its rows and invalid rows do not split the data set's rows"
    pairs = record["pairs"]
    if pairs.numel():
        per_bond = counts.repeat_interleave(bond_ptr.diff())  # each bond's molecule's atom count
        if bool(((pairs < 0) | (pairs >= per_bond.unsqueeze(1))).any()):
            return "its pairs name atoms outside their molecules"
    return None


def _feature_problem(record: dict, smiles: Sequence[str]) -> Optional[str]:
    """The stored codes against what this call computes without featurising: atom counts within
    RDKit's unsanitised parse of the SMILES, element codes in range, degree codes = bonds."""
    atoms, pairs, rows, counts, atom_ptr, bond_ptr = (record[k] for k in ("atoms", "pairs", "rows", "atom_counts",
                                                                          "atom_ptr", "bond_ptr"))
    if rows.numel():
        low, high = atom_count_bounds([smiles[i] for i in rows.tolist()])
        outside = (counts < torch.from_numpy(low)) | (counts > torch.from_numpy(high))
        if bool(outside.any()):
            m = int(torch.nonzero(outside)[0, 0])
            return (f"molecule at row {int(rows[m])} has {int(counts[m])} atoms, but its SMILES has "
                    f"{int(low[m])}..{int(high[m])}")
    N = atoms.shape[0]
    if N:
        element = atoms[:, ATOM_CODES.index("element")]
        if int(element.min()) < 0 or int(element.max()) >= len(ELEMENTS):
            return f"its element codes hold an index outside 0..{len(ELEMENTS) - 1}"
        ends = pairs.long() + atom_ptr[:-1].repeat_interleave(bond_ptr.diff()).unsqueeze(1)  # global atom ids
        degree = torch.bincount(ends.flatten(), minlength=N)
        if not torch.equal(atoms[:, ATOM_CODES.index("degree")].long(), degree):
            return "its degree codes disagree with its bonds"
    return None


def featurize_dataset(dataset: MoleculeDataset, cache_dir=None, progress: bool = False) -> MoleculeGraphs:
    """Featurise every molecule of ``dataset`` (:func:`rpfast.datasets.molecules.featurize_smiles`),
    reading the result from ``cache_dir`` when the same SMILES were featurised before by the same
    featuriser (its settings and the RDKit release, :func:`rpfast.datasets.molecules.featurizer_settings`)
    and writing it there otherwise (:func:`cached_graphs`, :func:`store_graphs`).
    ``cache_dir=False`` disables the cache.

    The file's name is a SHA-256 of the featuriser version and the SMILES; the file also holds the
    featuriser settings, a hash of the SMILES list, the atom counts and a SHA-256 over everything it
    holds. A file is used only when all of them match this call (and the atom counts match RDKit's
    quick parse of the SMILES, the element and degree features the bonds); otherwise (another data
    set's cache under the name, bit flips, edited arrays, an older format, an unreadable file) a
    ``RuntimeWarning`` says why and the molecules are featurised again and the file rewritten.
    The checks catch accidents, not a forger who recomputes the hashes. A cache file is written
    atomically; a read-only or full disk costs the cache, not the run."""
    graphs = cached_graphs(dataset, cache_dir)
    if graphs is not None:
        return graphs
    graphs = featurize_smiles(dataset.smiles, progress=progress)
    store_graphs(graphs, dataset, cache_dir)
    return graphs


def cache_path(dataset: MoleculeDataset, cache_dir=None) -> Optional[Path]:
    """The cache file of ``dataset`` under ``cache_dir`` (default :func:`default_cache_dir`;
    None for ``cache_dir=False``): named by a SHA-256 of the featuriser version and the SMILES."""
    if not isinstance(dataset, MoleculeDataset):
        raise TypeError(f"dataset must be a MoleculeDataset, got {type(dataset).__name__}")
    if cache_dir is False:
        return None
    key = hashlib.sha256("\n".join([FEATURIZER_VERSION, *dataset.smiles]).encode()).hexdigest()[:32]
    return Path(default_cache_dir() if cache_dir is None else cache_dir) / f"molecules-{key}.pt"


def cached_graphs(dataset: MoleculeDataset, cache_dir=None) -> Optional[MoleculeGraphs]:
    """``dataset``'s featurisation read from its cache file (memory-mapped) when the file passes
    every check; None when there is none, or, with a ``RuntimeWarning`` saying why, when it fails
    one (see :func:`featurize_dataset`)."""
    path = cache_path(dataset, cache_dir)
    if path is None or not path.is_file():
        return None
    found = _read_cache(path, dataset.smiles, featurizer_settings())
    if isinstance(found, MoleculeGraphs):
        return found
    warnings.warn(f"featurisation cache {path} is not used: {found}; featurising the molecules again and "
                  f"rewriting it", RuntimeWarning, stacklevel=3)
    return None


def store_graphs(graphs: MoleculeGraphs, dataset: MoleculeDataset, cache_dir=None) -> None:
    """Write ``graphs`` (``dataset``'s featurisation) as its cache file, atomically; a read-only or
    full disk costs the cache, not the run (nothing is raised)."""
    if not isinstance(graphs, MoleculeGraphs):
        raise TypeError(f"graphs must be a MoleculeGraphs, got {type(graphs).__name__}")
    path = cache_path(dataset, cache_dir)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            torch.save(_cache_record(graphs, dataset.smiles, featurizer_settings()), tmp)
    except OSError:
        pass


def _read_cache(path: Path, smiles: List[str], settings: dict):
    """The :class:`MoleculeGraphs` the cache file at ``path`` holds for ``smiles``, or why it cannot
    be used (a string)."""
    if not zipfile.is_zipfile(path):  # torch's own message would speak of torch.save's options
        return "it cannot be read as a cache file (not a zip archive, the format torch.save writes)"
    try:
        record = torch.load(path, weights_only=True, mmap=True)  # pages in as it is read
    except Exception as error:  # noqa: BLE001 - a damaged cache is recomputed, never fatal
        # torch's unpickling message suggests weights_only=False: never for a file found on disk
        first = "" if isinstance(error, pickle.UnpicklingError) else (str(error).splitlines() or [""])[0]
        return f"it cannot be read as a cache file ({type(error).__name__}{': ' * bool(first)}{first[:200]})"
    problem = _cache_problem(record, smiles, settings)
    if problem is not None:
        return problem
    return MoleculeGraphs(**{k: record[k] for k in _STORED}, smiles=[smiles[i] for i in record["rows"].tolist()])
