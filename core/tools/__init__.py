"""Tools around the library, never imported by it: the model builder (`bootstrap`), the prompt
generator (`promptgen`), benchmarks (`bench_overhead`, `bench_model`), the efficiency study
(`efficiency`) and test fixtures (`fixtures`). `core.cli` routes the `mrtpo` subcommands to them.
"""
