"""The method's maths, in a handful of files (formulas: docs/METHOD.md):

- `advantages`: GRPO, GDPO and MRTPO estimators (registry `ESTIMATORS`);
- `routing`: JS distance, relevance variants (`RELEVANCE`), routing weights, routing sources (`ROUTING`);
- `teacher_forcing`: teacher-forced passes with the prompt-prefix cache, rollout log-probs, contrastive JS;
- `loss`: the clipped surrogate with the optional KL penalty;
- `span_metrics`: span agreement of relevance and routing mass with the verifiers' spans.

Pure torch functions; nothing here loads a model, reads a file or imports streamlit/plotly.
"""
