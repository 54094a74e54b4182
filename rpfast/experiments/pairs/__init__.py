"""`rpfast pairs`: RP models on pairs of 1-WL-equivalent graphs under BREC's RPC protocol:
protocol.py (one pair: relabel, train, test), models.py (the model each pair trains),
statistics.py (T2, the decision), run.py (options, the run over every pair and seed),
rows.py (pairs.csv: created with its header, read back by --resume), report.py."""
