"""Relational Pooling (Murphy et al. 2019), every consumer over a :class:`Strategy` (:class:`Exact`,
:class:`PiSGD`, :class:`KAry`, :class:`Oriented`): :class:`RelationalPooling` averages any f over
the relabeled dense graphs (encoders :class:`VecMLP`, :class:`VecRNN`, :class:`AdjCNN`,
:class:`RootWalks`; :class:`Concat` joins them);
:class:`RPGNN` / :class:`RPGIN` give any PyG-style GNN one-hot IDs of the positions;
:class:`RootedRP` marks the vertex at position 0 only and averages over all of them exactly;
:class:`SubgraphRP` runs a GNN on the subgraphs the first k positions induce."""
from rpfast.nn.rp.encoders import AdjCNN, VecMLP, VecRNN
from rpfast.nn.rp.gnn import RPGNN
from rpfast.nn.rp.pisgd import PiSGD
from rpfast.nn.rp.relational_pooling import RelationalPooling
from rpfast.nn.rp.rooted import RootedRP
from rpfast.nn.rp.rp_gin import RPGIN
from rpfast.nn.rp.oriented import Oriented
from rpfast.nn.rp.strategies import Exact, KAry, NodePositions, Relabelings, Strategy
from rpfast.nn.rp.subgraph import SubgraphRP, induced_subgraphs
from rpfast.nn.rp.walk_encoder import Concat, RootWalks

__all__ = ["RelationalPooling", "Strategy", "Relabelings", "NodePositions", "Exact", "PiSGD", "KAry", "Oriented",
           "VecMLP", "VecRNN", "AdjCNN", "RootWalks", "Concat", "RPGNN", "RPGIN", "RootedRP", "SubgraphRP",
           "induced_subgraphs"]
