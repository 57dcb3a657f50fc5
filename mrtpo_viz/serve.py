"""The app's server process: warm it up, then run Streamlit (what `mrtpo app` and `make demo` start).

    python -m mrtpo_viz.serve run app.py [streamlit options]

A fresh Streamlit server imports a page's modules on its first visit, and Plotly loads its property
validators on the first figure it builds: together most of a cold page's time (`mrtpo bench app`).
`warm_up()` pays for both before the server listens, so the first visitor of a new server gets a warm
page; its seconds are printed. Never imports torch.
"""

from __future__ import annotations

import sys
import time


def warm_up() -> float:
    """Import what the pages use and build one figure of each kind (loads Plotly's validators and
    serialisers); returns the seconds it took."""
    t0 = time.perf_counter()
    import numpy as np
    import pandas as pd
    import plotly.io as pio
    import pyarrow as pa

    import core.verifiers  # noqa: F401  (the Verifier debugger's playground)
    from mrtpo_viz import analysis, figures, form, launcher, loaders, ui  # noqa: F401

    names = ["a", "b"]
    metrics = pd.DataFrame({"step": np.arange(1, 4), "reward/all_satisfied": [0.1, 0.2, 0.3],
                            "loss/policy": 0.0, "time/step": 1.0, "time/update": 0.5,
                            **{f"reward/{n}": [0.2, 0.4, 0.6] for n in names},
                            **{f"span/{n}/auc": [0.5, 0.6, 0.7] for n in names}})
    credit = pd.DataFrame({"sample": 0, "reward": np.repeat(names, 3), "t": np.tile(np.arange(3), 2),
                           "token": "x", "distance": 0.1, "distance_skipped": False, "weight": 1.0, "credit": 0.0,
                           "in_span": [True, False, False] * 2, "score": 1.0})
    built = [
        figures.reward_curves({"run": metrics}, names),
        figures.step_time_figure({"run": metrics}),
        figures.auc_figure({"run": metrics}, names),
        figures.js_positions_figure(credit, names),
        figures.js_in_out_figure(credit, names),
    ]
    for fig in built:
        pio.to_json(fig.to_dict(), validate=False)
    pa.Table.from_pandas(analysis.js_in_out_table(credit))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    print(f"MRTPO workbench: warmed up in {warm_up():.1f} s (imports and plotting libraries)", flush=True)
    from streamlit.web import cli as streamlit_cli

    sys.argv = ["streamlit", *argv]
    return streamlit_cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
