"""Streamlit helpers shared by the pages, one topic per module; the pages use them as `ui.<name>`:

- `messages`: text from run stores and links shown as text (`plain`), warnings, state badges;
- `pickers`: the chosen run(s), kept across pages, and the run / sample select boxes;
- `links`: the page's state in the URL's query parameters (shareable links);
- `curve_style`: the curves' x axis, smoothing, log scale and seed groups, and their link parameters;
- `charts`: the pages' Plotly figures, drawn by plotly.js's cartesian bundle (`chart`);
- `page`: how an inspect page opens (its runs, live reruns) and the shared figure cache;
- `prefetch`: the browser's early load of the code the pages draw with (the chart code first);
- `tables`: small tables as HTML (`html_table`; `pick_table` for one whose rows are selected), not
  `st.dataframe`'s 1.7 MB module;
- `sample_panels`: the relevance switch and the reward-specificity panel of the sample pages;
- `warm`: the server's caches warmed for the chart pages a session opens next.

Never imports torch.
"""

from mrtpo_viz.ui.charts import chart
from mrtpo_viz.ui.curve_style import STYLE_PARAMS, X_CHOICES, apply_style_link, curve_controls, style_params
from mrtpo_viz.ui.links import LINKS_KEY, apply_run_link, find_run, link_target, write_link
from mrtpo_viz.ui.messages import (
    STATE_ICONS,
    link_warning,
    md_text,
    no_runs_message,
    plain,
    response_text,
    show_startup,
    show_warnings,
    state_badge,
)
from mrtpo_viz.ui.page import (
    FIGURE_REFRESH_S,
    REFRESH_S,
    cached_figure,
    follow_runs,
    page_runs,
    rerun_when,
    resolve_view,
    view_tabs,
)
from mrtpo_viz.ui.pickers import (
    RUN_KEY,
    RUNS_KEY,
    describe,
    keep_choice,
    pick_run,
    pick_runs,
    pick_sample,
    sample_filter_values,
    set_run,
)
from mrtpo_viz.ui.prefetch import (
    PREFETCH_MAX_MS,
    PREFETCH_QUIET_MS,
    PREFETCHED_KEY,
    app_modules,
    chart_module,
    prefetch_charts,
)
from mrtpo_viz.ui.sample_panels import relevance_switch, shown_sample, specificity_panel
from mrtpo_viz.ui.session import LAUNCHED_KEY, pending_runs, session_runs
from mrtpo_viz.ui.tables import html_table, pick_table

__all__ = [
    "FIGURE_REFRESH_S", "LAUNCHED_KEY", "LINKS_KEY", "PREFETCHED_KEY", "PREFETCH_MAX_MS", "PREFETCH_QUIET_MS",
    "REFRESH_S", "RUNS_KEY", "RUN_KEY", "STATE_ICONS", "STYLE_PARAMS", "X_CHOICES",
    "app_modules", "apply_run_link", "apply_style_link", "cached_figure", "chart", "chart_module", "curve_controls", "describe",
    "find_run", "html_table", "keep_choice", "link_target", "link_warning", "md_text", "no_runs_message", "page_runs", "pending_runs", "pick_run",
    "pick_table",
    "follow_runs", "pick_runs", "pick_sample", "plain", "prefetch_charts", "relevance_switch", "rerun_when", "response_text",
    "sample_filter_values", "session_runs", "set_run", "shown_sample", "show_startup", "show_warnings",
    "specificity_panel", "state_badge", "style_params", "resolve_view", "view_tabs", "write_link",
]
