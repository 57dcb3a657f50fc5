"""Evaluation of a model or of given responses against a prompt set (`mrtpo eval`: `core.evaluate.ifeval`)."""
