"""Streamlit entry of the MRTPO workbench: page config, session defaults, navigation. Nothing else.

Never imports torch; training runs in a separate process started from the Launch page.
"""

import streamlit as st

st.set_page_config(page_title="MRTPO workbench", layout="wide")

pages = {
    "Runs": [st.Page("mrtpo_viz/pages/runs.py", title="Runs", default=True)],
}
st.navigation(pages).run()
