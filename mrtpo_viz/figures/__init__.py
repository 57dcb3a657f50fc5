"""Plotly figures for the workbench pages: pure functions from run-store frames to `go.Figure`.

Inputs are the frames `core.run.store.RunStore` returns (`metrics()`: one row per step with namespaced
metric keys; `credit(step)`: the long credit map). Several runs overlay as one colour per series
and one dash style per run. No Streamlit here; never imports torch.

One module a topic, the pages use `figures.<name>`: `style` (palettes, dashes, the theme's text colour, layout
helpers), `lines` (line charts of per-step metrics, their thinning for the browser, small multiples), `training`
(the Training curves and Compare figures), `span_auc` (the Verifier debugger's span AUC per reward), `tokens` (per-token figures of one sample); `panels` (what each
Training curves panel and Compare quantity plots, and when it applies) is imported as `figures.panels`.
"""

from mrtpo_viz.figures.lines import (  # noqa: F401
    DISPLAY_POINTS,
    X_TITLES,
    display_indices,
    for_display,
    metric_lines,
    nonpositive_count,
    plotted_series,
    reward_series,
    small_multiples,
)
from mrtpo_viz.figures.span_auc import auc_figure, auc_scope, auc_title, rolling_mean  # noqa: F401
from mrtpo_viz.figures.style import (  # noqa: F401
    ALL_SATISFIED_COLOR,
    FOREGROUND,
    LEGEND_CHAR_PX,
    LEGEND_ROW_PX,
    LEGEND_WIDTH_PX,
    LOSS_KEYS,
    MARKERS_BELOW,
    MAX_BARS,
    OTHER_PALETTE,
    RUN_DASHES,
    RUN_PALETTE,
    SMALL_MULTIPLES_FROM,
    TEMPLATE,
    TIME_PARTS,
    legend_rows,
    run_colors,
)
from mrtpo_viz.figures.tokens import (  # noqa: F401
    MAX_TOKEN_TICKS,
    js_in_out_figure,
    js_in_out_summary_figure,
    js_positions_figure,
    span_runs,
    token_ticks,
)
from mrtpo_viz.figures.training import (  # noqa: F401
    loss_figure,
    per_reward_lines,
    replay_training_figure,
    reward_curves,
    step_time_figure,
)
