"""How rpfast's modules run, kept apart from the modules themselves (``rpfast.nn.gin`` holds
modules only): the one decider of a GIN's path (:mod:`.plan`), a model's one cache of bound
weights (:mod:`.binding`), the BatchNorm step rule (:mod:`.batch_norm_steps`), flat parameters
(:mod:`.flat_parameters`) and module-tree snapshots (:mod:`.tree_snapshot`)."""
