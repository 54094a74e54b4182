"""The benchmarks are a package beside the ``tests`` package: they import their helpers as
``benchmarks.paired``, ``benchmarks.baselines.*``, and the references the tests check against
as ``tests.helpers.reference`` (benchmarks depend on tests, never the other way)."""
