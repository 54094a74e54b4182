"""`rpfast csl`: RP-GIN against GIN on the CSL graphs (paper Table 1): experiment.py (options,
the cross-validated runs, the report)."""
