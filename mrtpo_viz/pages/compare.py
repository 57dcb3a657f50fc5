"""Compare runs: any logged quantity of the chosen runs overlaid, one colour per run (the all-satisfied rate by
default; rewards, span overlap and JS as one panel per reward), on the training samples or the held-out eval, with
the curves' smoothing, x axis, log scale and seed groups (mean and band); and the steps each run needed to reach
given all-satisfied rates (with seed groups on, per group: the mean and spread of its runs' steps); "any logged metric" plots the metrics.jsonl keys that typed names or glob patterns match
(`span/*/overlap`, `time/replay`), one panel each; a quantity of several panels is one figure of small panels sharing
one x axis (a zoom in one panel zooms them all: `figures.small_multiples`). A run without data for the chosen quantity is named, never
dropped silently. The state is the URL. While a chosen run trains the page is live (`ui.follow_runs`, as Training
curves)."""

from __future__ import annotations

import streamlit as st

from core.choices import control_label, routing_source
from mrtpo_viz import analysis, figures, loaders, reach, ui
from mrtpo_viz.figures import panels

PAGE = "compare"
METRICS = {m.label: m for m in panels.COMPARE_METRICS}
SOURCES = {"train": "training samples", "eval": "held-out eval"}

TARGETS_DEFAULT = "0.25, 0.5, 0.75"


def set_targets(text: str) -> None:
    """Make `text` the targets (a link's); the box is drawn anew with it."""
    st.session_state["compare_targets"] = text
    targets_box_hidden()


def targets_box_hidden() -> None:
    """The page ends without the targets box (or must draw it anew): its next key is a new one, since the browser
    keeps a vanished box's last value and would send it back (empty) for the old key."""
    st.session_state["compare_targets_gen"] = st.session_state.get("compare_targets_gen", 0) + 1


def targets_box(label: str) -> str:
    """The targets text box; its text is kept in `compare_targets`, outside the widget (see targets_box_hidden)."""
    kept = st.session_state.setdefault("compare_targets", TARGETS_DEFAULT)
    key = f"compare_targets_box{st.session_state.get('compare_targets_gen', 0)}"
    if key not in st.session_state:
        st.session_state[key] = kept
    text = st.text_input(label, key=key)
    st.session_state["compare_targets"] = text
    return text


st.title("Compare runs")
runs = ui.page_runs(charts=True)
target = ui.link_target(PAGE, ("run", "metric", "pattern", "source", "targets", *ui.STYLE_PARAMS))
if target:
    ui.apply_run_link(runs, target, multi=True)
    ui.apply_style_link(target, PAGE)
    if "metric" in target:
        if target["metric"][0] in METRICS:
            st.session_state["compare_metric"] = target["metric"][0]
        else:
            ui.link_warning("metric", target["metric"][0], "all satisfied")
    if "pattern" in target:
        st.session_state["compare_pattern"] = target["pattern"][0]
    if "source" in target:
        st.session_state["compare_source"] = target["source"][0] if target["source"][0] in SOURCES else "train"
    if "targets" in target:
        set_targets(target["targets"][0])
chosen = ui.pick_runs(runs, "Runs to compare (one colour per run)", default_count=min(4, len(runs)))
if not chosen:
    targets_box_hidden()
    ui.write_link(PAGE, {})
    st.info("Pick runs to compare.")
    st.stop()

metrics, configs, rewards = {}, {}, []
ui.follow_runs([str(r.path) for r in chosen], {str(r.path): loaders.run_label(r) for r in chosen}, PAGE)
for r in chosen:
    df, warnings = loaders.metrics(r.path)
    ui.show_warnings(loaders.run_label(r), warnings)
    cfg, _ = loaders.config(r.path)
    samples = int(cfg.get("prompts_per_step") or 0) * int(cfg.get("group_size") or 0) or None
    metrics[loaders.run_label(r)] = analysis.with_x_columns(df, samples)
    configs[loaders.run_label(r)] = cfg
    rewards += [n for n in loaders.reward_names(r.path) if n not in rewards]
has_eval = any(panels.has_eval(df) for df in metrics.values())

c1, c2 = st.columns([3, 1])
offered, left_out = panels.compare_metrics_for(configs)
ui.keep_choice("compare_metric", [m.label for m in offered], "all satisfied")
metric = METRICS[c1.selectbox("Quantity", [m.label for m in offered], key="compare_metric",
                              help="one colour per run; per-reward quantities get one panel per reward")]
if left_out:
    st.caption("Not offered for these runs (rounding noise, not a measurement): "
               + "; ".join(f"{ui.md_text(label)} ({ui.md_text(why)})" for label, why in left_out.items()) + ".")
noise = [run for run, cfg in configs.items() if not metric.active(cfg)]
if noise:  # the quantity is real in some chosen runs only: the others are left out of the figure
    st.caption(f"Left out of {ui.plain(metric.label)}: " + ", ".join(ui.plain(r) for r in noise)
               + f" ({ui.md_text(metric.inactive_why)}).")
shown = {run: df for run, df in metrics.items() if run not in noise}
ui.keep_choice("compare_source", list(SOURCES), "train")
source = c2.radio("Scored on", list(SOURCES), horizontal=True, key="compare_source", format_func=SOURCES.get,
                  disabled=not (has_eval and metric.eval_key),
                  help="held-out eval: sampled responses to the eval prompt set, logged at checkpoint steps")
if not (has_eval and metric.eval_key):
    source = "train"
style = ui.curve_controls(PAGE)

differ = analysis.eval_setting_differences(configs) if source == "eval" else []
if differ:
    st.warning("These held-out rates come from different evaluations, so they are not comparable: "
               + "; ".join(ui.plain(d) for d in differ) + ".")
if style["group"]:  # one line (the mean) and a band per seed group
    groups = analysis.seed_groups({run: configs[run] for run in shown})
    shown = analysis.group_metrics(shown, groups, style["group"])
patterns: list[str] = []
if metric.by_name:
    st.session_state.setdefault("compare_pattern", "span/*/overlap, time/replay")
    patterns = analysis.metric_patterns(st.text_input(
        "Metrics (names or glob patterns, comma-separated)", key="compare_pattern",
        help="any key of metrics.jsonl: e.g. time/replay, span/*/overlap, js/*/max; * matches any text, / included"))
columns = list(dict.fromkeys(c for df in shown.values() for c in df.columns))
keys = panels.compare_keys(metric, rewards, source, patterns, columns)
if metric.by_name:
    if not keys:
        st.info("No logged metric of these runs matches " + ", ".join(ui.plain(p) for p in patterns or ["(nothing)"])
                + ".")
    elif len(keys) > panels.MAX_PATTERN_PANELS:
        st.caption(f"{len(keys)} metrics match; the first {panels.MAX_PATTERN_PANELS} are drawn.")
        keys = dict(list(keys.items())[:panels.MAX_PATTERN_PANELS])
missing = [run for run, df in shown.items() if not any(panels.has_values(df, k) for k in keys.values())]
if missing and keys:
    what = "no eval data" if source == "eval" else f"no data for {metric.label}"
    st.warning(f"Not drawn ({what}): " + ", ".join(ui.plain(m) for m in missing) + ".")

drawn, panel_of = {}, {}  # {figure title: figure} (the CSV's figures), {panel title: figure}
for title, key in keys.items():
    full_title = title if metric.by_name else f"{metric.label}: {title}" if metric.per_reward else metric.label
    if source == "eval":
        full_title += " (held-out eval)"
    fig = figures.metric_lines(shown, {key: title}, full_title, metric.yaxis, color_by="run", x=style["x"],
                               smooth=style["smooth"], log_y=style["log_y"] and not metric.rate,
                               height=340 if metric.per_reward or metric.by_name else 420)
    if metric.rate and fig.data:
        fig.update_yaxes(range=[-0.03, 1.03])
    fig.update_layout(meta={"isolate": "run"}, hovermode="closest")  # hovering a line dims the other runs (ui.charts)
    drawn[full_title] = panel_of[title] = fig
if (metric.per_reward or metric.by_name) and drawn:  # one figure of small panels, zoomed together
    many = metric.label + (" (held-out eval)" if source == "eval" else "")
    grid = figures.small_multiples(panel_of, many, cols=2, row_px=320, y_range=(-0.03, 1.03) if metric.rate else None)
    grid.update_layout(meta={"isolate": "run"}, hovermode="closest")
    ui.chart(figures.for_display(grid), key="fig_compare_panels")
else:
    for i, fig in enumerate(drawn.values()):
        ui.chart(figures.for_display(fig), key=f"fig_compare_{i}")
if drawn:
    st.caption("Hover a line to dim the other runs; double-click a run in the legend to show it alone.")
st.download_button("Plotted series (CSV)", lambda: figures.plotted_series(drawn).to_csv(index=False).encode(),
                   "compare.csv", "text/csv", on_click="ignore", key="compare_csv")

st.subheader("Steps to reach an all-satisfied rate")
st.caption(f"On {SOURCES[source]}" + (" (logged at checkpoint steps)." if source == "eval" else "."))
text = targets_box("Targets (comma-separated rates in [0, 1])")
try:
    targets = sorted({float(x) for x in text.replace(";", ",").split(",") if x.strip()})
    if any(not 0 <= t <= 1 for t in targets):
        raise ValueError("every target must lie in [0, 1]")
except ValueError as exc:
    st.error(f"Targets: {exc}")
    targets = []
if targets:
    key = "reward/all_satisfied" if source == "train" else "eval/all_satisfied"
    table = analysis.steps_to_reach(metrics, targets, key=key)
    table.insert(1, "method", [configs[run].get("method") for run in table["run"]])
    table.insert(2, "routing", [routing_source(configs[run]) for run in table["run"]])
    table.insert(3, "relevance", [configs[run].get("relevance") if routing_source(configs[run]) == "replay" else None
                                  for run in table["run"]])
    table.insert(4, "control", [control_label(configs[run]) for run in table["run"]])
    no_data = "no eval data" if source == "eval" else "no data"
    if style["group"]:  # the seed groups, as on the figure: mean and spread of their runs' first steps
        groups = analysis.seed_groups(configs)
        by_group = reach.group_steps_to_reach(table.drop(columns=["method", "routing", "relevance", "control"]), groups,
                                              targets, style["group"], no_data)
        for i, col in enumerate(("method", "routing", "relevance", "control"), start=2):
            by_group.insert(i, col, [table.set_index("run").loc[runs[0], col] for runs in groups.values()])
        ui.html_table(by_group)
        st.caption(("mean ± std (sample standard deviation)" if style["group"] == "std" else "mean (min–max)")
                   + " of the first step at that rate over the group's runs that reached it, and of their best "
                   "rates; (k of n): only k of the group's n runs with data reached it. Pick \"each run\" under "
                   "Runs for one row per run.")
    else:
        ui.html_table(analysis.describe_steps_to_reach(table, targets, no_data))
    st.caption("not reached: the run's logged values stay below that rate; "
               + ("no eval data: the run logged no held-out evaluation (it had no eval prompt set)."
                  if source == "eval" else "no data: the run logged no all-satisfied rate yet."))

ui.write_link(PAGE, {"run": [loaders.run_label(r) for r in chosen],
                     "metric": None if metric.label == "all satisfied" else metric.label,
                     "pattern": ", ".join(patterns) if metric.by_name else None,
                     "source": None if source == "train" else source,
                     "targets": None if text == TARGETS_DEFAULT else text, **ui.style_params(style)})
