"""What the tests share: references (reference.py), hypothesis strategies (strategies.py),
assertions, the layer cases every device runs (layer_cases.py), process inspection, Tox21
subsets and the repository's paths. The benchmarks import the references from here too."""
