"""Streamlit entry of the MRTPO workbench: page config, session defaults, navigation, and the warm of the other chart
pages after a page was drawn (`mrtpo_viz.ui.warm`). Nothing else.

Never imports torch; training runs in a separate process started from the Launch page.
"""

from pathlib import Path

import streamlit as st

from mrtpo_viz.ui.warm import script_run, warm_other_pages

# A local favicon: a page's ":material/...:" icon would otherwise become the tab's favicon, which the browser fetches
# from an outside font host on every page (the app must work offline and send nothing out).
st.set_page_config(page_title="MRTPO workbench", page_icon=str(Path(__file__).parent / "mrtpo_viz" / "assets" / "favicon.png"),
                   layout="wide")

# Session defaults, in one place: the run chosen on single-run pages, the runs overlaid on multi-run pages,
# the Launch form's errors and the runs this session started.
for key, value in {"mrtpo_run": None, "mrtpo_runs": [], "launch_errors": {}, "launched_runs": []}.items():
    st.session_state.setdefault(key, value)

pages = {
    "Runs": [
        st.Page("mrtpo_viz/pages/runs.py", title="Runs", icon=":material/list:", default=True),
        st.Page("mrtpo_viz/pages/launch.py", title="Launch", icon=":material/rocket_launch:", url_path="launch"),
    ],
    "Inspect": [
        st.Page("mrtpo_viz/pages/curves.py", title="Training curves", icon=":material/show_chart:", url_path="curves"),
        st.Page("mrtpo_viz/pages/credit.py", title="Token credit", icon=":material/format_color_fill:", url_path="credit"),
        st.Page("mrtpo_viz/pages/js.py", title="JS divergence", icon=":material/difference:", url_path="js"),
        st.Page("mrtpo_viz/pages/debugger.py", title="Verifier debugger", icon=":material/bug_report:", url_path="debugger"),
    ],
    "Compare": [
        st.Page("mrtpo_viz/pages/compare.py", title="Compare runs", icon=":material/compare_arrows:", url_path="compare"),
    ],
}
page = st.navigation(pages)
with script_run():  # no warm session runs meanwhile
    page.run()
# The server's caches for the chart pages this session may open next, filled while the user reads this one.
warm_other_pages(page.url_path)
