"""The app as Streamlit serves it: `app.py` in an `st.App` with the middleware `mrtpo_viz.server.serve.ChartPagePreload`
(`streamlit run mrtpo_viz/server/asgi.py` finds `app`; `mrtpo app` and `make demo` start it through `mrtpo_viz.server.serve`).
Never imports torch."""

import streamlit as st
from starlette.middleware import Middleware

from core.paths import APP_FILE
from mrtpo_viz.server.serve import ChartPagePreload

app = st.App(APP_FILE, middleware=[Middleware(ChartPagePreload)])
