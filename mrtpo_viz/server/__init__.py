"""The server process `mrtpo app` starts, above the pages and their helpers: `serve` warms it up (the pages'
imports, Plotly's validators) and runs Streamlit on `asgi`, app.py in an `st.App` whose middleware preloads the
chart pages' code. Nothing in `mrtpo_viz` imports it."""
