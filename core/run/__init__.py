"""The training run: one step (`step`), what it records (`record`), the run around the steps
(`lifecycle`), the run store both trainers write and the app reads (`store`), run names (`names`)
and the `mrtpo train` command (`train_cli`).

This package root imports nothing: `store` and `names` are torch-free and the app uses them.
"""
