"""Small tables the pages show: sample summaries, credit/span disagreement, steps to a target, exports.

Pure pandas on run-store frames (schema in docs/CONTRACTS.md). No Streamlit; never imports torch.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.choices import control_label, routing_source

OUTCOMES = ("any", "satisfied", "violated", "not stated")  # the one vocabulary of outcomes (the metric keys' too)


def ema(values: Sequence[float] | pd.Series, weight: float) -> pd.Series:
    """Exponential moving average with bias correction (TensorBoard's smoothing).

    Over the finite values x_1..x_n in order: s_n = weight * s_{n-1} + (1 - weight) * x_n with s_0 = 0, and the
    smoothed value is s_n / (1 - weight^n), so the first one equals x_1 (no pull towards 0). NaN or infinite
    entries stay NaN and leave the average unchanged. weight = 0 returns the values; weight in [0, 1).
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight must lie in [0, 1), got {weight}")
    x = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    out = np.full(len(x), np.nan)
    s, n = 0.0, 0
    for i, v in enumerate(x):
        if not math.isfinite(v):
            continue
        n += 1
        s = weight * s + (1.0 - weight) * v
        out[i] = s / (1.0 - weight**n)
    index = values.index if isinstance(values, pd.Series) else None
    return pd.Series(out, index=index)


def with_x_columns(metrics: pd.DataFrame, samples_per_step: int | None) -> pd.DataFrame:
    """The metrics frame plus the other x axes of the curves: `samples` = step * samples per step (responses
    seen, prompts_per_step * group_size; absent when unknown) and `minutes` = the running sum of `time/step`
    / 60 (training time; evaluations and checkpoints are not counted, a missing step time counts 0)."""
    df = metrics.copy()
    if samples_per_step and "step" in df.columns:
        df["samples"] = df["step"] * int(samples_per_step)
    if "time/step" in df.columns:
        df["minutes"] = pd.to_numeric(df["time/step"], errors="coerce").fillna(0.0).cumsum() / 60.0
    return df


# ---------------------------------------------------------------------------------------------- seed groups

# Config fields that name or place a run, or only say how it is recorded: runs that differ in these and in the seeds
# alone (the shuffle control's seed is one) were trained with the same recipe.
NOT_RECIPE = ("seed", "routing_shuffle_seed", "run_name", "runs_dir", "device", "checkpoint_every", "keep_checkpoints",
              "schema_version")
BANDS = {"std": "mean ± std", "minmax": "min to max"}
BAND_LO, BAND_HI = "::lo", "::hi"  # suffixes of a group frame's band columns (`group_metrics`)
_SEED_SUFFIX = re.compile(r"[-_.]?(s|seed)[-_]?\d+$")


def recipe_key(cfg: Mapping) -> str:
    """What a run was trained with, everything but its seed (and NOT_RECIPE), as a canonical string."""
    return json.dumps({k: v for k, v in cfg.items() if k not in NOT_RECIPE}, sort_keys=True, default=str)


def seed_groups(configs: Mapping[str, Mapping]) -> dict[str, list[str]]:
    """Runs grouped by everything but the seed: {group label: run labels}, groups in the order of their first run.
    A group's label is its runs' common name without a trailing seed (`study-v2-gdpo-s3` -> `study-v2-gdpo`), or
    the first run's name with `+…` when the names differ otherwise, followed by ` (N seeds)` for N > 1."""
    by_key: dict[str, list[str]] = {}
    for run, cfg in configs.items():
        by_key.setdefault(recipe_key(cfg), []).append(run)
    out: dict[str, list[str]] = {}
    for runs in by_key.values():
        stems = list(dict.fromkeys(_SEED_SUFFIX.sub("", r) or r for r in runs))
        label = stems[0] if len(stems) == 1 else f"{stems[0]}+…"
        if len(runs) > 1:
            label += f" ({len(runs)} seeds)"
        while label in out:
            label += "'"
        out[label] = runs
    return out


def group_metrics(metrics_by_run: Mapping[str, pd.DataFrame], groups: Mapping[str, Sequence[str]],
                  band: str = "std") -> dict[str, pd.DataFrame]:
    """One frame per seed group, aligned on `step`: each numeric column is the mean over the group's runs that
    logged it at that step, and, for a group of two runs or more, `<column>::lo` / `<column>::hi` bound its band:
    mean ± the sample standard deviation (ddof = 1) for `band="std"`, the min and max for `band="minmax"`. A group
    of one run is its frame unchanged. The x columns (`samples`, `minutes`) are averaged like the others."""
    if band not in BANDS:
        raise ValueError(f"band must be one of {sorted(BANDS)}, got {band!r}")
    out: dict[str, pd.DataFrame] = {}
    for label, runs in groups.items():
        frames = [metrics_by_run[r] for r in runs if r in metrics_by_run and metrics_by_run[r] is not None
                  and not metrics_by_run[r].empty and "step" in metrics_by_run[r].columns]
        if len(frames) <= 1:
            out[label] = frames[0] if frames else pd.DataFrame({"step": []})
            continue
        long = pd.concat([f.apply(pd.to_numeric, errors="coerce") for f in frames], ignore_index=True)
        by_step = long.groupby("step", sort=True)
        mean = by_step.mean()
        if band == "std":
            spread = by_step.std(ddof=1)
            lo, hi = mean - spread, mean + spread
        else:
            lo, hi = by_step.min(), by_step.max()
        cols = [c for c in mean.columns if c not in ("samples", "minutes")]
        out[label] = pd.concat([mean, lo[cols].add_suffix(BAND_LO), hi[cols].add_suffix(BAND_HI)], axis=1).reset_index()
    return out


# Frame columns that are not logged metrics (the x axes and a seed group's bands).
NOT_METRICS = ("step", "samples", "minutes")


def metric_patterns(text: str) -> list[str]:
    """The names or glob patterns in `text` (separated by commas or spaces), in order, each once."""
    return list(dict.fromkeys(p for p in re.split(r"[,\s]+", text or "") if p))


def match_metrics(columns: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The logged metric keys among `columns` that a name or a glob pattern (`fnmatch`: `*` also crosses `/`, so
    `span/*/overlap` matches `span/a:b/overlap`) of `patterns` names, in the order of `columns`."""
    keys = [c for c in columns if c not in NOT_METRICS and not c.endswith((BAND_LO, BAND_HI))]
    return [c for c in keys if any(fnmatch.fnmatchcase(c, p) for p in patterns)]


def sample_scores(credit_df: pd.DataFrame) -> dict[int, dict[str, float]]:
    """sample -> {reward: score} (NaN where the reward does not apply)."""
    first = credit_df.drop_duplicates(["sample", "reward"])
    out: dict[int, dict[str, float]] = {}
    for sample, reward, score in zip(first["sample"].tolist(), first["reward"].astype(str).tolist(),
                                     first["score"].astype("float64").tolist(), strict=True):
        out.setdefault(int(sample), {})[reward] = score
    return out


def outcome_marks(scores: Mapping[str, float], rewards: Sequence[str]) -> str:
    """One mark per reward: ✓ satisfied (score >= 1), ✗ violated, · not stated by the sample's prompt."""
    marks = []
    for r in rewards:
        v = scores.get(r, float("nan"))
        marks.append("·" if not math.isfinite(v) else ("✓" if v >= 1 else "✗"))
    return "".join(marks)


def stated_rewards(scores: Mapping[str, float], rewards: Sequence[str]) -> list[str]:
    """The rewards a sample's prompt states (a finite score), in `rewards` order."""
    return [r for r in rewards if math.isfinite(scores.get(r, float("nan")))]


def sample_rewards_table(sample_df: pd.DataFrame) -> pd.DataFrame:
    """The rewards of one sample: reward, score, group advantage, credit sum, share of |credit| in spans."""
    rows = []
    rewards = sample_df["reward"].astype(str).to_numpy()
    credit_all = sample_df["credit"].to_numpy(dtype="float64")
    span_all = sample_df["in_span"].to_numpy(dtype=bool)
    score_all = sample_df["score"].to_numpy(dtype="float64")
    adv_all = sample_df["group_adv"].to_numpy(dtype="float64")
    for reward in dict.fromkeys(rewards.tolist()):
        m = rewards == reward
        credit = np.nan_to_num(credit_all[m])
        spans = span_all[m]
        mass = float(np.abs(credit).sum())
        inside = float(np.abs(credit[spans]).sum())
        rows.append({
            "reward": reward,
            "score": float(score_all[m][0]),
            "group_adv": float(adv_all[m][0]),
            "credit_sum": float(credit.sum()),
            "in_span_tokens": int(spans.sum()),
            "credit_share_in_span": inside / mass if mass > 0 else float("nan"),
        })
    return pd.DataFrame(rows, columns=["reward", "score", "group_adv", "credit_sum", "in_span_tokens",
                                       "credit_share_in_span"])


def filter_samples(credit_df: pd.DataFrame, prompt_key: str | None = None, reward: str | None = None,
                   outcome: str = "any") -> list[int]:
    """Sample indices that match a prompt key (None = any) and a reward outcome.

    outcome: "satisfied" (score >= 1), "violated" (score < 1), "not stated" (score NaN: the prompt does not state it), or "any".
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
    if credit_df.empty:
        return []
    per = credit_df.drop_duplicates(["sample", "reward"])
    keep = pd.Series(True, index=per.index)
    if prompt_key is not None:
        keep &= per["prompt_key"] == prompt_key
    if reward is not None and outcome != "any":
        is_r = per["reward"] == reward
        score = pd.to_numeric(per["score"], errors="coerce")
        cond = {"satisfied": score >= 1.0, "violated": score < 1.0, "not stated": score.isna()}[outcome]
        ok_samples = set(per.loc[is_r & cond, "sample"])
        keep &= per["sample"].isin(ok_samples)
    return sorted(int(s) for s in set(per.loc[keep, "sample"]))


def span_mass_in(weight: Sequence[float], in_span: Sequence[bool]) -> float:
    """Share of routing mass inside the verifier's spans: sum_{t in span} w_t / sum_t w_t (NaN when sum is 0)."""
    w = np.asarray(weight, dtype="float64")
    m = np.asarray(in_span, dtype=bool)
    w = np.where(np.isfinite(w), w, 0.0)
    total = w.sum()
    return float(w[m].sum() / total) if total > 0 else float("nan")


def disagreement(credit_frames: Mapping[int, pd.DataFrame], top: int = 20) -> pd.DataFrame:
    """Samples where a reward's routing disagrees most with its verifier's spans.

    For each (step, sample, reward) whose verifier marked at least one token, whose reward applies and whose
    group advantage is not 0 (a reward that gives no credit cannot misplace it):
    mass_in = span_mass_in(weight, in_span), span_share = in-span tokens / tokens (what uniform routing puts
    inside), and disagreement = 1 - mass_in. Rows sorted by disagreement (largest first), then step.
    """
    parts = []
    for step, df in credit_frames.items():
        if df.empty:
            continue
        w = pd.to_numeric(df["weight"], errors="coerce").to_numpy(dtype="float64")
        w = np.where(np.isfinite(w), w, 0.0)
        span = df["in_span"].to_numpy(dtype=bool)
        frame = pd.DataFrame({"sample": df["sample"].to_numpy(), "reward": df["reward"].astype(str).to_numpy(),
                              "prompt_key": df["prompt_key"].astype(str).to_numpy(),
                              "score": df["score"].to_numpy(dtype="float64"),
                              "group_adv": df["group_adv"].to_numpy(dtype="float64"),
                              "w": w, "w_in": w * span, "span": span.astype("float64")})
        g = frame.groupby(["sample", "reward"], sort=False).agg(
            prompt_key=("prompt_key", "first"), score=("score", "first"), group_adv=("group_adv", "first"),
            w=("w", "sum"), w_in=("w_in", "sum"), span_share=("span", "mean"), any_span=("span", "max"))
        g = g[(g["any_span"] > 0) & np.isfinite(g["score"]) & (g["group_adv"] != 0.0) & (g["w"] > 0)]
        g = g.reset_index().assign(step=int(step), mass_in=lambda f: f["w_in"] / f["w"])
        parts.append(g.assign(disagreement=1.0 - g["mass_in"]))
    return _top_disagreements(parts, top)


def disagreement_from_index(indexes: Mapping[int, pd.DataFrame], top: int = 20) -> pd.DataFrame:
    """`disagreement` from the steps' indexes (`RunStore.credit_index`: per (sample, reward) `weight_sum`,
    `weight_in_span`, `span_tokens`, `length`), without their token rows: the same rows and order."""
    parts = []
    for step, ix in indexes.items():
        if ix.empty:
            continue
        g = ix[(ix["span_tokens"] > 0) & np.isfinite(ix["score"].astype("float64")) & (ix["group_adv"] != 0.0)
               & (ix["weight_sum"] > 0)]
        if g.empty:
            continue
        g = g.assign(step=int(step), reward=g["reward"].astype(str), prompt_key=g["prompt_key"].astype(str),
                     score=g["score"].astype("float64"), group_adv=g["group_adv"].astype("float64"),
                     mass_in=g["weight_in_span"] / g["weight_sum"], span_share=g["span_tokens"] / g["length"])
        parts.append(g.assign(disagreement=1.0 - g["mass_in"]))
    return _top_disagreements(parts, top)


def _top_disagreements(parts: list[pd.DataFrame], top: int) -> pd.DataFrame:
    """The disagreement rows of all steps, largest first (then step, sample), the first `top`."""
    cols = ["step", "sample", "reward", "prompt_key", "score", "group_adv", "mass_in", "span_share", "disagreement"]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)[cols]
    out["sample"] = out["sample"].astype(int)
    return out.sort_values(["disagreement", "step", "sample"], ascending=[False, True, True]).head(top).reset_index(
        drop=True)


def replay_coverage_from_index(index: pd.DataFrame) -> tuple[int, int]:
    """`replay_coverage` from a step's index: (pairs with a computed distance and not skipped, skipped pairs)."""
    if index.empty:
        return 0, 0
    skipped = index["distance_skipped"].astype(bool)
    return int((index["distance_computed"].astype(bool) & ~skipped).sum()), int(skipped.sum())


def js_in_out_table_from_summary(summary: pd.DataFrame, rewards: Sequence[str]) -> pd.DataFrame:
    """`js_in_out_table` from a step's distance summary (`RunStore.credit_summary`): per reward, token counts and
    mean distance in / out of the spans, and their ratio."""
    cols = ["reward", "tokens_in", "tokens_out", "js_in", "js_out", "ratio"]
    rows = []
    names = [r for r in rewards if r in set(summary["reward"])] + [r for r in dict.fromkeys(summary["reward"])
                                                                    if r not in rewards]
    for reward in names:
        part = summary[summary["reward"] == reward].set_index("where")
        n_in = int(part.loc["in", "tokens"]) if "in" in part.index else 0
        n_out = int(part.loc["out", "tokens"]) if "out" in part.index else 0
        js_in = float(part.loc["in", "mean"]) if n_in else float("nan")
        js_out = float(part.loc["out", "mean"]) if n_out else float("nan")
        ratio = js_in / js_out if js_out and math.isfinite(js_out) and js_out > 0 else float("nan")
        rows.append({"reward": reward, "tokens_in": n_in, "tokens_out": n_out, "js_in": js_in, "js_out": js_out,
                     "ratio": ratio})
    return pd.DataFrame(rows, columns=cols)


def replay_coverage(credit_df: pd.DataFrame) -> tuple[int, int]:
    """(computed, skipped): the (sample, reward) pairs of a credit map with JS, and those whose contrastive
    pass replay skipped (`distance_skipped`: the reward applies but its group advantage is 0)."""
    pairs = credit_df.drop_duplicates(["sample", "reward"])
    skipped = pairs["distance_skipped"].astype(bool) if "distance_skipped" in pairs.columns else pd.Series(False, pairs.index)
    computed = pd.to_numeric(pairs["distance"], errors="coerce").notna() & ~skipped
    return int(computed.sum()), int(skipped.sum())


def js_in_out_table(credit_df: pd.DataFrame) -> pd.DataFrame:
    """Per reward: token counts and mean JS distance inside / outside the verifier's spans, and their ratio."""
    cols = ["reward", "tokens_in", "tokens_out", "js_in", "js_out", "ratio"]
    rows = []
    for reward, d in credit_df.groupby("reward", sort=False, observed=True):
        js = pd.to_numeric(d["distance"], errors="coerce")
        m = d["in_span"].astype(bool)
        js_in = float(js[m].mean()) if m.any() else float("nan")
        js_out = float(js[~m].mean()) if (~m).any() else float("nan")
        ratio = js_in / js_out if js_out and math.isfinite(js_out) and js_out > 0 else float("nan")
        rows.append({"reward": reward, "tokens_in": int(m.sum()), "tokens_out": int((~m).sum()),
                     "js_in": js_in, "js_out": js_out, "ratio": ratio})
    return pd.DataFrame(rows, columns=cols)


def steps_to_reach(metrics_by_run: Mapping[str, pd.DataFrame], thresholds: Sequence[float],
                   key: str = "reward/all_satisfied") -> pd.DataFrame:
    """First step at which `key` >= each threshold, per run (None when never reached); plus the best value."""
    rows = []
    for run, df in metrics_by_run.items():
        row: dict[str, object] = {"run": run}
        y = pd.to_numeric(df[key], errors="coerce") if key in df.columns else pd.Series(dtype="float64")
        for thr in thresholds:
            hit = df.loc[y >= thr, "step"] if len(y) else pd.Series(dtype="int64")
            row[f"≥ {thr:g}"] = int(hit.iloc[0]) if len(hit) else None
        row["best"] = float(y.max()) if y.notna().any() else None
        row["steps logged"] = int(len(df))
        rows.append(row)
    return pd.DataFrame(rows)


# What a held-out rate depends on besides the training: the model evaluated and the evaluation (prompt set, how
# many of its prompts, samples per prompt); rates of runs that differ in one of them are not comparable.
EVAL_SETTINGS = {"model": "model", "eval_prompt_set": "evaluation prompt set", "eval_prompts": "evaluation prompts",
                 "eval_samples": "samples per evaluation prompt"}


def eval_setting_differences(configs: Mapping[str, Mapping]) -> list[str]:
    """The evaluation settings (EVAL_SETTINGS) that differ between the runs' configs, each as
    "<setting>: <value> (<runs>) vs <value> (<runs>)"; [] when every run was evaluated alike."""
    out = []
    for field, name in EVAL_SETTINGS.items():
        by_value: dict[str, list[str]] = {}
        for run, cfg in configs.items():
            by_value.setdefault(str(cfg.get(field)), []).append(run)
        if len(by_value) > 1:
            out.append(f"{name}: " + " vs ".join(f"{v} ({', '.join(runs)})" for v, runs in by_value.items()))
    return out


def describe_steps_to_reach(table: pd.DataFrame, thresholds: Sequence[float], missing: str = "no data") -> pd.DataFrame:
    """`steps_to_reach`'s table as text for display: a first step as a number, "not reached" when the run's
    values stay below the rate, and `missing` (e.g. "no eval data") for every cell of a run that logged no
    value at all, so such a run is never read as one that failed to learn."""
    out = table.copy()
    no_data = out["best"].isna()
    for thr in thresholds:
        col = f"≥ {thr:g}"
        out[col] = [missing if empty else ("not reached" if pd.isna(v) else str(int(v)))
                    for v, empty in zip(out[col], no_data, strict=True)]
    out["best"] = [missing if empty else f"{v:.3g}" for v, empty in zip(out["best"], no_data, strict=True)]
    return out


def credit_export_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The credit rows to export, with the schema's columns in order (extra columns dropped)."""
    from core.run.store import CREDIT_COLUMNS

    out = df.loc[:, [c for c in CREDIT_COLUMNS if c in df.columns]].reset_index(drop=True)
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):  # the app's loaders compact text columns
            out[col] = out[col].astype(str)
    return out


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV of a credit map with every text field quoted: a token may be a lone carriage return, which pandas
    leaves unquoted otherwise, so that a reader would split the row there."""
    return credit_export_frame(df).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC).encode("utf-8")


def to_parquet_bytes(df: pd.DataFrame) -> bytes:
    """Parquet with the run store's credit schema (so the file reads back like a run's own credit map)."""
    from core.run.store import CREDIT_SCHEMA

    frame = credit_export_frame(df)
    schema = CREDIT_SCHEMA if list(frame.columns) == list(CREDIT_SCHEMA.names) else None
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- the run list

# The columns of the Runs table, and those it can be filtered and grouped by.
RUN_COLUMNS = ("run", "state", "progress", "step", "of", "all satisfied (last)", "all satisfied (best)",
               "held-out (last)", "s/step", "method", "routing", "relevance", "lr", "G", "prompts/step", "seed",
               "model", "backend", "processes", "training time (min)", "updated", "tags", "notes", "source", "path")
GROUPABLE = ("state", "method", "routing", "relevance", "lr", "G", "prompts/step", "seed", "of", "model", "backend",
             "processes", "tags", "source")


def training_minutes(metrics: pd.DataFrame | None) -> float | None:
    """Minutes the run spent training: the sum of its steps' `time/step` (the x axis "training time" of the curves).
    Unlike status.json's start-to-last-update span it leaves out the idle time between a Stop and a Resume (and the
    startup, evaluations and checkpoints). None when the run logged no step time."""
    if metrics is None or "time/step" not in metrics.columns:
        return None
    t = pd.to_numeric(metrics["time/step"], errors="coerce")
    return round(float(t.sum()) / 60.0, 1) if t.notna().any() else None


def _last(metrics: pd.DataFrame | None, key: str, how: str = "last") -> float | None:
    """The last logged (or the best, or the median) finite value of `key`, None when there is none."""
    if metrics is None or key not in metrics.columns:
        return None
    y = pd.to_numeric(metrics[key], errors="coerce").dropna()
    if y.empty:
        return None
    return float({"last": y.iloc[-1], "best": y.max(), "median": y.median()}[how])


def run_row(label: str, info, cfg: Mapping, status: Mapping, notes: Mapping,
            metrics: pd.DataFrame | None = None) -> dict:
    """One row of the Runs table: a run's state, progress, its summary metrics (from `metrics`: the last and the
    best all-satisfied rate on the training samples, the last held-out all-satisfied rate, the median seconds per
    step), the settings that tell runs apart (backend and process count included) and its training time."""
    method = info.method or cfg.get("method")
    source = routing_source({**cfg, "method": method})
    return {
        "run": label,
        "state": info.state,
        "progress": (info.step / info.total_steps) if info.total_steps else None,
        "step": info.step,
        "of": info.total_steps,
        "all satisfied (last)": _last(metrics, "reward/all_satisfied"),
        "all satisfied (best)": _last(metrics, "reward/all_satisfied", "best"),
        "held-out (last)": _last(metrics, "eval/all_satisfied"),
        "s/step": _last(metrics, "time/step", "median"),
        "method": method,
        "routing": cfg.get("routing") if source else None,
        "relevance": cfg.get("relevance") if source == "replay" else None,
        "control": control_label({**cfg, "method": method}),
        "lr": cfg.get("lr"),
        "G": cfg.get("group_size"),
        "prompts/step": cfg.get("prompts_per_step"),
        "seed": cfg.get("seed"),
        "model": info.model or cfg.get("model"),
        "backend": cfg.get("backend") or ("builtin" if cfg else None),
        "processes": int(cfg.get("nproc") or 1) if cfg else None,
        "training time (min)": training_minutes(metrics),
        "updated": info.updated_at,
        "tags": ", ".join(notes.get("tags", [])),
        "notes": str(notes.get("notes", "")).split("\n", 1)[0],
        "source": info.source,
        "path": str(info.path),
    }


def filter_runs(table: pd.DataFrame, search: str = "", where: Mapping[str, Sequence] | None = None) -> pd.DataFrame:
    """Rows whose name, tags or notes contain `search` (case-insensitive) and whose column values are among
    `where[column]` (for `tags`: rows carrying any of the given tags)."""
    keep = pd.Series(True, index=table.index)
    if search.strip():
        text = (table["run"].astype(str) + " " + table["tags"].astype(str) + " " + table["notes"].astype(str)).str.lower()
        keep &= text.str.contains(search.strip().lower(), regex=False)
    for column, values in (where or {}).items():
        if column == "tags":
            wanted = set(values)
            keep &= table["tags"].map(lambda t, wanted=wanted: bool(wanted & set(_tags(t))))
        else:
            keep &= table[column].astype(str).isin([str(v) for v in values])
    return table[keep]


def _tags(cell: object) -> list[str]:
    return [x.strip() for x in str(cell).split(",") if x.strip()]


def group_values(table: pd.DataFrame, column: str) -> list[str]:
    """The distinct values of a column as text, in first-seen order (for tags: each tag once)."""
    if column == "tags":
        return list(dict.fromkeys(x for t in table["tags"] for x in _tags(t)))
    return list(dict.fromkeys(table[column].astype(str)))
