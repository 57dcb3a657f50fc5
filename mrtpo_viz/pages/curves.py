"""Training curves: rewards, losses, KL, entropy, clip fraction, JS, span agreement, step time and response length of
one or several runs (panels whose quantity a run does not have are left out, with the reason); smoothing, x axis
(step, samples seen, training time), log scale, seed groups (the runs that differ only in their seed as their mean
and a band), more panels of any logged metric by name or glob pattern (`span/*/overlap`, `time/replay`) and a CSV of
the plotted series. The panels are grouped in tabs (`panels.CURVE_VIEWS`: rewards; held-out eval; loss, KL,
entropy; credit routing; step time and length; more panels) and only the open tab's figures are built and drawn
(`ui.view_tabs`; link parameter view=); a tab's half-width panels are one figure of small panels sharing one x axis
(a zoom or pan in one moves them all: `figures.small_multiples`).

While a chosen run is active only its progress line is live (`ui.follow_runs`: a fragment polls the run's status
every 2 s and sends that line alone); the figures are drawn again by a run of the whole page that it asks for when a
step was written and the figures were drawn `ui.FIGURE_REFRESH_S` or more ago, or when a run starts or ends. Built
figures are shared by every session of the server (a new visitor of a run that someone has viewed gets them without
building them again). A run that has not finished a step shows what its trainer is doing (its startup phase and log
tail). The page's state is its URL (a shareable link)."""

from __future__ import annotations

import streamlit as st

from mrtpo_viz import analysis, figures, launcher, loaders, ui
from mrtpo_viz.figures import panels

PAGE = "curves"

st.title("Training curves")
runs = ui.page_runs(charts=True)
target = ui.link_target(PAGE, ("run", "metrics", "view", *ui.STYLE_PARAMS))
if target:
    ui.apply_run_link(runs, target, multi=True)
    ui.apply_style_link(target, PAGE)
chosen = ui.pick_runs(runs, "Runs (overlaid: one dash style per run)")
style = ui.curve_controls(PAGE)
VIEWS = {view: label for view, (label, _) in panels.CURVE_VIEWS.items()}
if "metrics" in target:
    st.session_state["curves_metrics"] = target["metrics"][0]
    if "view" not in target:  # a link with panels by name opens them
        st.session_state["curves_view"] = VIEWS["more"]


def show_more() -> None:
    st.session_state["curves_view"] = VIEWS["more"]  # typed names or patterns: open their panels


patterns = analysis.metric_patterns(st.text_input(
    "More panels: metric names or glob patterns (comma-separated)", key="curves_metrics", on_change=show_more,
    placeholder="e.g. span/*/overlap, time/replay, js/*/max",
    help="one panel per name or pattern, one line per matching key of metrics.jsonl, in the tab More panels; "
         "* matches any text, / included"))
# a tab's panel groups are names a link may use for it (`&view=loss` opens "Loss, KL, entropy")
VIEW_ALIASES = {group: view for view, (_, groups) in panels.CURVE_VIEWS.items() for group in groups}
view, tab = ui.view_tabs(PAGE, VIEWS, target, VIEW_ALIASES)
ui.write_link(PAGE, {"run": [loaders.run_label(r) for r in chosen], **ui.style_params(style),
                     "metrics": ", ".join(patterns) or None, "view": None if view == "rewards" else view})
if not chosen:
    st.info("Pick at least one run.")
    st.stop()

paths = [str(r.path) for r in chosen]
labels = {str(r.path): loaders.run_label(r) for r in chosen}


def build() -> tuple[dict, dict, object, list[str], dict[str, list[str]]]:
    """(figures by panel name, the full-width ones as drawn (`figures.for_display`: long lines thinned; the CSV reads
    the first), the view's half-width panels as one figure of small panels zoomed together (`figures.small_multiples`,
    as drawn; None without any), reasons of the panels left out, warnings by run)."""
    metrics, configs, rewards, problems = {}, {}, [], {}
    for p in paths:
        df, warnings = loaders.metrics(p)
        problems[labels[p]] = warnings
        cfg, _ = loaders.config(p)
        cfg = cfg or launcher.launched_config(p)
        samples = int(cfg.get("prompts_per_step") or 0) * int(cfg.get("group_size") or 0) or None
        metrics[labels[p]] = analysis.with_x_columns(df, samples)
        configs[labels[p]] = cfg
        rewards += [n for n in loaders.reward_names(p) if n not in rewards]
    if style["group"]:  # one line (the mean) and a band per seed group
        groups = analysis.seed_groups(configs)
        metrics = analysis.group_metrics(metrics, groups, style["group"])
        configs = {g: configs[runs[0]] for g, runs in groups.items()}
    drawn, hidden = panels.build_panels(metrics, rewards, configs, x=style["x"], smooth=style["smooth"],
                                        log_y=style["log_y"], only=panels.CURVE_VIEWS[view][1])
    for pattern in patterns if view == "more" else ():  # the panels asked for by name or pattern
        columns = list(dict.fromkeys(c for df in metrics.values() for c in df.columns))
        keys = analysis.match_metrics(columns, [pattern])
        if not keys:
            hidden.append(f"{ui.plain(pattern)}: no logged metric of these runs matches it")
            continue
        fig = figures.metric_lines(metrics, keys, pattern, x=style["x"], smooth=style["smooth"], log_y=style["log_y"])
        drawn[f"pattern_{pattern}"] = (panels.Panel(f"pattern_{pattern}", lambda *a, f=fig, **k: f), fig)
    half = {fig.layout.title.text: fig for panel, fig in drawn.values() if not panel.full}
    combined = figures.small_multiples(half, VIEWS[view], cols=2, row_px=340) if half else None
    shown = {name: figures.for_display(fig) for name, (panel, fig) in drawn.items() if panel.full}
    return drawn, shown, figures.for_display(combined) if combined is not None else None, hidden, problems


@st.cache_resource(show_spinner=False, max_entries=16)
def built(key: tuple, run_labels: tuple) -> tuple[dict, dict, object, list[str], dict[str, list[str]]]:
    """`build()` once per signature and run labels, for every session (the figures are only read)."""
    return build()


key = ui.follow_runs(paths, labels, PAGE, extra=(*sorted(style.items()), view, *patterns))
drawn, shown, combined, hidden, problems = built(key, tuple(labels.items()))
for label, warnings in problems.items():
    ui.show_warnings(label, warnings)

with tab:
    if view == "more" and not patterns:
        st.info("Type metric names or glob patterns above (e.g. `span/*/overlap, time/replay`): one panel each.")
    for name, fig in shown.items():  # the full-width panels, then the others as one figure
        ui.chart(fig, key=f"fig_{name}")
    if combined is not None:
        ui.chart(combined, key=f"fig_{view}")
    for why in hidden:
        st.caption(f"Not shown — {why}.")
    st.download_button("Plotted series (CSV)", lambda: figures.plotted_series(
        {fig.layout.title.text: fig for _, fig in drawn.values()}).to_csv(index=False).encode(),
        "training_curves.csv", "text/csv", on_click="ignore", key="curves_csv",
        help="the series of this tab's figures")
