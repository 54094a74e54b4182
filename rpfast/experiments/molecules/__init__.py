"""`rpfast molecules`: RP models on MoleculeNet data (paper Table 2): train.py (options, the
runs, the report), predict.py (scoring new molecules with checkpoints), tasks.py (task types,
losses, metrics), models.py (the models from an Architecture), splits.py (splits and
splits.json), checkpoints.py (checkpoints, prediction), report.py (tables, files, figures)."""
