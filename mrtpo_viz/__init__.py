"""Viewing side of the MRTPO workbench: reads run stores, builds plotly figures and token heatmap
HTML, and holds the Streamlit pages.

Never imports torch: the app must start in a couple of seconds and never trains in its own process.
"""
