"""Training side of the MRTPO workbench: verifiers, advantages, contrastive replay, the trainer
and the run store.

Never imports streamlit or plotly. This package root imports nothing heavy, so that the app can
use the torch-free modules (`core.run.store`, `core.config`, `core.verifiers`, `core.tasks`).
"""

__version__ = "0.1.0"
