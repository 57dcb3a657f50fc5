"""The style of a page's curves (x axis, smoothing, log scale, seed groups): its controls and its link parameters.

Never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from mrtpo_viz.ui.messages import link_warning
from mrtpo_viz.ui.pickers import keep_choice

STYLE_PARAMS = ("x", "smooth", "log", "group")  # the link parameters of the curves' style
X_CHOICES = {"step": "step", "samples": "samples seen", "minutes": "training time"}
GROUP_CHOICES = {"none": "each run", "std": "seed groups: mean ± std", "minmax": "seed groups: min to max"}


def _style_keys(page: str) -> tuple[str, str, str, str]:
    return f"{page}_x", f"{page}_smooth", f"{page}_log", f"{page}_group"


def curve_controls(page: str) -> dict:
    """The x axis, the smoothing, the log scale and the seed grouping of a page's curves: {"x", "smooth", "log_y",
    "group"} ("group": None for one line per run, else the band of `analysis.group_metrics`)."""
    kx, ks, kl, kg = _style_keys(page)
    keep_choice(kx, list(X_CHOICES), "step")
    keep_choice(kg, list(GROUP_CHOICES), "none")
    st.session_state.setdefault(ks, 0.0)
    st.session_state.setdefault(kl, False)
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1.6], vertical_alignment="bottom")
    x = c1.radio("X axis", list(X_CHOICES), key=kx, horizontal=True, format_func=X_CHOICES.get,
                 help="samples seen: responses (prompts per step × G); training time: the sum of step times "
                      "(evaluations and checkpoints not counted)")
    smooth = c2.slider("Smoothing (EMA weight)", 0.0, 0.99, step=0.01, key=ks,
                       help="exponential moving average with bias correction, as TensorBoard; the raw values stay "
                            "drawn, faint. 0: off")
    log_y = c3.checkbox("Log y axis", key=kl, help="for every panel except rates in [0, 1]; values ≤ 0 are not drawn")
    group = c4.selectbox("Runs", list(GROUP_CHOICES), key=kg, format_func=GROUP_CHOICES.get,
                         help="seed groups: the runs that differ only in their seed as one line (their mean at each "
                              "step) with a band (± the sample std, or min to max); the legend gives the seed count")
    return {"x": x, "smooth": float(smooth), "log_y": bool(log_y), "group": None if group == "none" else group}


def style_params(style: Mapping) -> dict[str, object]:
    """The link parameters of a curve style (defaults left out)."""
    return {"x": None if style["x"] == "step" else style["x"],
            "smooth": f"{style['smooth']:g}" if style["smooth"] else None, "log": "1" if style["log_y"] else None,
            "group": style.get("group")}


def apply_style_link(target: Mapping[str, list[str]], page: str) -> None:
    """Set the curve style a link gives; warn about values that are not valid."""
    kx, ks, kl, kg = _style_keys(page)
    if "group" in target:
        if target["group"][0] in GROUP_CHOICES:
            st.session_state[kg] = target["group"][0]
        else:
            link_warning("grouping", target["group"][0], "each run")
    if "x" in target:
        if target["x"][0] in X_CHOICES:
            st.session_state[kx] = target["x"][0]
        else:
            link_warning("x axis", target["x"][0], "step")
    if "smooth" in target:
        try:
            value = float(target["smooth"][0])
            if not 0.0 <= value <= 0.99:
                raise ValueError
            st.session_state[ks] = round(value, 2)
        except ValueError:
            link_warning("smoothing", target["smooth"][0], "no smoothing")
    if "log" in target:
        st.session_state[kl] = target["log"][0] in ("1", "true", "yes")
