"""torch.nn layers built on rpfast's kernels."""
from rpfast.nn.gin import GIN, GINConv, GINLayer
from rpfast.nn.duvenaud import Duvenaud, DuvenaudConv, RPDuvenaud
from rpfast.nn.pooling import sum_pool
from rpfast.nn.sync_batch_norm import SyncBatchNorm, convert_sync_batch_norm
from rpfast.nn.rp import (RPGIN, RPGNN, AdjCNN, Concat, Exact, KAry, Oriented, PiSGD, RelationalPooling, RootedRP,
                          RootWalks, SubgraphRP, VecMLP, VecRNN)

__all__ = ["GINConv", "GIN", "GINLayer", "RPGIN", "RelationalPooling", "Exact", "PiSGD", "KAry", "Oriented",
           "VecMLP", "VecRNN", "AdjCNN", "RootWalks", "Concat", "RPGNN", "RootedRP", "SubgraphRP", "Duvenaud",
           "DuvenaudConv", "RPDuvenaud", "sum_pool", "SyncBatchNorm", "convert_sync_batch_norm"]
