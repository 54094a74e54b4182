"""torch.nn layers built on rpfast's kernels."""
from rpfast.nn.gin import GIN, GINLayer
from rpfast.nn.duvenaud import Duvenaud, DuvenaudConv, RPDuvenaud
from rpfast.nn.gin_conv import GINConv
from rpfast.nn.pooling import sum_pool
from rpfast.nn.sync_batch_norm import SyncBatchNorm, convert_sync_batch_norm
from rpfast.nn.rp import RPGNN, KAryGNN, AdjCNN, Exact, KAry, Oriented, PiSGD, RelationalPooling, VecMLP, VecRNN
from rpfast.nn.rp_gin import RPGIN

__all__ = ["GINConv", "GIN", "GINLayer", "RPGIN", "RelationalPooling", "Exact", "PiSGD", "KAry", "Oriented",
           "VecMLP", "VecRNN", "AdjCNN", "RPGNN", "KAryGNN", "Duvenaud", "DuvenaudConv", "RPDuvenaud", "sum_pool",
           "SyncBatchNorm", "convert_sync_batch_norm"]
