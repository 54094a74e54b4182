"""Relational Pooling (Murphy et al. 2019): :class:`RelationalPooling` averages any f over the
relabelings a strategy yields (:class:`Exact`, :class:`PiSGD`, :class:`KAry`, :class:`Oriented`)."""
from rpfast.nn.rp.relational_pooling import RelationalPooling
from rpfast.nn.rp.strategies import Exact, KAry, Oriented, PiSGD, Relabelings, Strategy

__all__ = ["RelationalPooling", "Strategy", "Relabelings", "Exact", "PiSGD", "KAry", "Oriented"]
