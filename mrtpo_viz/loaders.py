"""Cached readers of the run store for the pages.

Every cached function takes the file's (mtime_ns, size) as an argument, so its cache key changes
when the trainer appends a step or replaces a file: a page never shows stale data and never
re-reads an unchanged file. Data frames use `st.cache_data` (copies per caller), never
`cache_resource`. Each loader returns the frame and the reader's warnings (a corrupt file is a
warning on the page, never an exception).

Never imports torch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from core.run.store import RunInfo, RunStore, credit_path, list_runs
from mrtpo_viz.paths import run_sources


def file_key(path: str | os.PathLike) -> tuple[int, int]:
    """(mtime_ns, size) of a file, (0, -1) when it does not exist: the part of a cache key that changes on write."""
    try:
        s = os.stat(path)
    except OSError:
        return (0, -1)
    return (s.st_mtime_ns, s.st_size)


@st.cache_data(show_spinner=False, max_entries=64)
def _metrics(run_path: str, key: tuple[int, int]) -> tuple[pd.DataFrame, list[str]]:
    store = RunStore(Path(run_path))
    df = store.metrics()
    return df, list(store.warnings)


def metrics(run_path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """metrics.jsonl of a run as a frame (one row per completed step) and the reader's warnings."""
    run_path = str(run_path)
    return _metrics(run_path, file_key(Path(run_path) / "metrics.jsonl"))


# Text columns repeated on every row of a credit map (one value per sample or reward). As categoricals the
# cached frame pickles in ~3 ms instead of ~90 ms for 8 samples x 256 tokens x 4 rewards (cache_data copies
# its value on every read, so this is paid on each rerun).
# `token` too: pandas' arrow-backed strings make every row selection a pyarrow `take` (~2 ms per column).
CATEGORICAL_COLUMNS = ("prompt_key", "prompt", "response", "reward", "token")


def compact_credit(df: pd.DataFrame) -> pd.DataFrame:
    """The credit map with its repeated text columns as categoricals (values unchanged)."""
    df = df.copy()
    for col in CATEGORICAL_COLUMNS:
        if col in df.columns:
            df[col] = df[col].astype("category")
    return df


@st.cache_data(show_spinner=False, max_entries=32)
def _credit(run_path: str, step: int, key: tuple[int, int]) -> tuple[pd.DataFrame, list[str]]:
    store = RunStore(Path(run_path))
    df = compact_credit(store.credit(step))
    return df, list(store.warnings)


def credit(run_path: str | os.PathLike, step: int) -> tuple[pd.DataFrame, list[str]]:
    """The credit map of one step and the reader's warnings."""
    run_path = str(run_path)
    return _credit(run_path, int(step), file_key(credit_path(Path(run_path), int(step))))


@st.cache_data(show_spinner=False, max_entries=64)
def _credit_index(run_path: str, step: int, key: tuple[int, int]) -> tuple[pd.DataFrame, list[str]]:
    store = RunStore(Path(run_path))
    return store.credit_index(step), list(store.warnings)


def credit_index(run_path: str | os.PathLike, step: int) -> tuple[pd.DataFrame, list[str]]:
    """The step's index (one row per (sample, reward), `RunStore.credit_index`: read from the file's footer) and
    the reader's warnings: what selectors and step-wide summaries need, without the token rows."""
    run_path = str(run_path)
    return _credit_index(run_path, int(step), file_key(credit_path(Path(run_path), int(step))))


@st.cache_data(show_spinner=False, max_entries=64)
def _credit_summary(run_path: str, step: int, key: tuple[int, int]) -> tuple[pd.DataFrame, list[str]]:
    store = RunStore(Path(run_path))
    return store.credit_summary(step), list(store.warnings)


def credit_summary(run_path: str | os.PathLike, step: int) -> tuple[pd.DataFrame, list[str]]:
    """The step's distances in / out of the verifiers' spans per reward (`RunStore.credit_summary`: quartiles,
    fences, means; from the file's footer) and the reader's warnings."""
    run_path = str(run_path)
    return _credit_summary(run_path, int(step), file_key(credit_path(Path(run_path), int(step))))


@st.cache_data(show_spinner=False, max_entries=64)
def _credit_sample(run_path: str, step: int, sample: int, key: tuple[int, int]) -> tuple[pd.DataFrame, list[str]]:
    store = RunStore(Path(run_path))
    df = compact_credit(store.credit_tokens(step, samples=[sample]))
    return df, list(store.warnings)


def credit_sample(run_path: str | os.PathLike, step: int, sample: int) -> tuple[pd.DataFrame, list[str]]:
    """The token rows of one sample of a step (every reward; `RunStore.credit_tokens`: its row group only) and
    the reader's warnings."""
    run_path = str(run_path)
    return _credit_sample(run_path, int(step), int(sample), file_key(credit_path(Path(run_path), int(step))))


@st.cache_data(show_spinner=False, max_entries=64)
def _config(run_path: str, key: tuple[int, int]) -> tuple[dict, list[str]]:
    store = RunStore(Path(run_path))
    return store.config(), list(store.warnings)


def config(run_path: str | os.PathLike) -> tuple[dict, list[str]]:
    run_path = str(run_path)
    return _config(run_path, file_key(Path(run_path) / "config.json"))


def reward_names(run_path: str | os.PathLike) -> list[str]:
    """The run's rewards: config.json's `reward_names`, else the `reward/<name>` metric keys."""
    cfg, _ = config(run_path)
    names = cfg.get("reward_names")
    if isinstance(names, list) and names:
        return [str(n) for n in names]
    df, _ = metrics(run_path)
    return [c.split("/", 1)[1] for c in df.columns if c.startswith("reward/") and c != "reward/all_satisfied"]


def rewards_without_spans(run_path: str | os.PathLike) -> list[str]:
    """The rewards whose functions report no inspected spans (config.json's `reward_routes`, written by
    MRTPOTrainer for a user's own reward functions); [] for runs without it (every workbench verifier reports)."""
    cfg, _ = config(run_path)
    routes = cfg.get("reward_routes")
    if not isinstance(routes, dict):
        return []
    return [str(n) for n, r in routes.items() if isinstance(r, dict) and r.get("spans") is False]


def status(run_path: str | os.PathLike) -> dict:
    """status.json with crash detection (never cached: it is tiny and must be current)."""
    return RunStore(Path(run_path)).status()


def credit_steps(run_path: str | os.PathLike) -> list[int]:
    """The run's complete steps with a credit map (`RunStore.credit_steps`), listed again only when its credit
    folder (a map added, removed or renamed) or its metrics.jsonl (a step completed) changed: a 2,000-step run's
    listing takes ~14 ms, and an inspect page asks for it two or three times a run."""
    path = Path(run_path)
    return list(_credit_steps(str(path), file_key(path / "credit"), file_key(path / "metrics.jsonl")))


@st.cache_data(show_spinner=False, max_entries=256)
def _credit_steps(run_path: str, folder_key: tuple[int, int], metrics_key: tuple[int, int]) -> list[int]:
    return RunStore(Path(run_path)).credit_steps()


def log_tail(run_path: str | os.PathLike, lines: int = 30) -> str:
    return RunStore(Path(run_path)).log_tail(lines)


def all_runs() -> list[RunInfo]:
    """Every run of the runs directory and the shipped samples (newest first). Not cached: states change."""
    sources = run_sources()
    return list_runs(*(d for _, d in sources), labels=[label for label, _ in sources])


def run_label(info: RunInfo) -> str:
    """How a run is named in pickers: its name, prefixed by `sample/` for shipped demo runs."""
    return info.name if info.source == "runs" else f"{info.source}/{info.name}"
