"""Relational Pooling (Murphy et al. 2019): :class:`RelationalPooling` averages any f over the
relabelings a strategy yields (:class:`Exact`, :class:`PiSGD`, :class:`KAry`, :class:`Oriented`);
encoders f (:class:`VecMLP`, :class:`VecRNN`, :class:`AdjCNN`); :class:`RPGNN` wraps any PyG-style GNN."""
from rpfast.nn.rp.encoders import AdjCNN, VecMLP, VecRNN
from rpfast.nn.rp.gnn import RPGNN
from rpfast.nn.rp.kary_gnn import KAryGNN, induced_subgraphs
from rpfast.nn.rp.relational_pooling import RelationalPooling
from rpfast.nn.rp.strategies import Exact, KAry, Oriented, PiSGD, Relabelings, Strategy

__all__ = ["RelationalPooling", "Strategy", "Relabelings", "Exact", "PiSGD", "KAry", "Oriented",
           "VecMLP", "VecRNN", "AdjCNN", "RPGNN", "KAryGNN", "induced_subgraphs"]
