"""Two panels of the sample pages (Credit map, JS map): the relevance switch, which recomputes a step's credit
under another relevance variant from the stored d, and the reward-specificity panel of one sample.

Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from mrtpo_viz import loaders
from mrtpo_viz.ui.messages import md_text, plain, show_warnings
from mrtpo_viz.ui.pickers import drawn_for, keep_choice
from mrtpo_viz.ui.tables import html_table


def shown_sample(path: str, step: int, sample: int, label: str, cfg: Mapping, rewards: Sequence[str], page: str):
    """The shown sample's token rows, read alone (`loaders.credit_sample`), their warnings shown under the run's
    `label`, then the relevance switch (`relevance_switch`, told the step's skipped pairs from its index); stops
    the page when they cannot be read. Returns (the sample's credit frame, the chosen variant or None)."""
    sample_df, warnings = loaders.credit_sample(path, step, sample)
    show_warnings(label, warnings)
    if sample_df.empty:
        st.warning(f"The token rows of sample {sample} could not be read (see the warnings above).")
        st.stop()
    from mrtpo_viz import analysis
    index, _ = loaders.credit_index(path, step)  # cached: the page drew its selectors from it
    return relevance_switch(sample_df, cfg, rewards, page, step_skipped=analysis.replay_coverage_from_index(index)[1],
                            run=path)


def relevance_switch(df, cfg: Mapping, rewards: Sequence[str], page: str, where=None, step_skipped: int | None = None,
                     run: str | None = None):
    """A select box of the relevance variants recomputable from this step's stored d (`specificity.
    computable_variants`), the others listed with why not; another `run` than last time opens on its own variant.
    Returns (the credit frame, recomputed under the chosen variant when it is not the run's own, with a `relevance`
    column; the chosen variant or None). `step_skipped`: the (sample, reward) pairs of the whole step whose replay
    was skipped (from its index); None counts those of `df` and says so."""
    from core.config import DEFAULT_RELEVANCE
    from mrtpo_viz import specificity
    ok, why = specificity.computable_variants(cfg)
    if not ok:
        return df, None
    own = str(cfg.get("relevance") or DEFAULT_RELEVANCE)
    key = f"{page}_relevance"
    if drawn_for(key, run):  # another run: its own variant (and the labels of this run: which one it trained)
        st.session_state[key] = own
    keep_choice(key, ok, own)
    variant = (where or st).selectbox(
        "Relevance", ok, key=key, format_func=lambda v: f"{v} (trained)" if v == own else f"{v} (recomputed)",
        help="the variants this step's stored per-reward distances d allow: the same contrastive pass, another "
             "combine; routing weights use the run's lam, w_max and sharpen")
    if why:
        st.caption("Not computable from this step's stored values: "
                   + "; ".join(f"**{md_text(v)}** {md_text(r)}" for v, r in why.items()) + ".")
    if variant == own:
        return df, variant
    st.info(f"Routing weights, credit and the total advantage below are recomputed under **{plain(variant)}** from "
            f"the stored d; the run trained with {plain(own)}.")
    if step_skipped is None:
        pairs = df.loc[df["distance_skipped"].astype(bool), ["sample", "reward"]].drop_duplicates() \
            if "distance_skipped" in df else df.iloc[:0]
        skipped, where_text = len(pairs), "of this sample"
    else:
        skipped, where_text = int(step_skipped), "of this step"
    if skipped and variant.endswith("_specific"):
        st.caption(f"{skipped} (sample, reward) pairs {where_text} were not replayed (group advantage 0), so "
                   "their d is not stored: the specific mean runs over the replayed rewards of a sample only, where a "
                   f"run trained with {plain(variant)} would have replayed them all.")
    return specificity.recompute_variant(df, variant, cfg, rewards), variant


def specificity_panel(sample_df, rewards: Sequence[str]) -> None:
    """For one sample: the pairwise routing overlap of the rewards its prompt states, the sample's mean, and
    each reward's span metrics (`specificity.sample_overlap`, `specificity.sample_metrics`)."""
    from mrtpo_viz import analysis, specificity
    stated = analysis.stated_rewards(analysis.sample_scores(sample_df).get(int(sample_df["sample"].iloc[0]), {}),
                                     rewards)
    st.subheader("Reward specificity of this sample")
    if len(stated) >= 2:
        overlap, mean = specificity.sample_overlap(sample_df, stated)
        st.caption("Routing overlap of each pair of rewards, sum_t min(p_k(t), p_j(t)) of their routing-weight "
                   "shares: 1 = the same tokens, 0 = disjoint; — a reward with itself; n/a a reward that did not act "
                   "on this response.")
        html_table(specificity.overlap_table(overlap), index=True)
        st.metric("Mean overlap (this sample)", "n/a" if mean != mean else f"{mean:.3f}")
    else:
        st.caption("One stated reward: no pairwise overlap.")
    table = specificity.sample_metrics(sample_df, stated)
    html_table(table, {c: ".3f" for c in ("mass_in", "lift", "lift_rotated", "mass_control", "retained", "auc")})
    st.caption("mass_in: share of the reward's routing weight inside its span; lift: that mass / the span's token "
               "share (1 = no preference); lift_rotated: the same with the reward labels rotated (a specific "
               "router's lift beats it); retained: the share of the reward's advantage mass its credit keeps; mass_control: the other rewards' mass on this span / its token share "
               "(low = specific); auc: the stored d telling span tokens from the rest of this response (counts "
               "towards auc_satisfied or auc_violated by the outcome). AUC vs the entropy baseline needs per-token "
               "entropies, which the credit map does not store. docs/METHOD.md, \"Specificity\".")
