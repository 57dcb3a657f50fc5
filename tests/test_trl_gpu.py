"""MRTPOTrainer with uniform routing against TRL's own GDPO on one batch, in bf16 on a CUDA device: the GPU half of
`examples/gpu_check.sh` (tests/test_trl.py checks the same reduction in float32 on the CPU, to 1e-6)."""

from __future__ import annotations

import pytest
import torch
from test_trl import micro, needs_trl, one_batch, trl_fields  # noqa: F401 - `micro` is a fixture

pytestmark = [pytest.mark.trl, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@needs_trl
def test_uniform_routing_reproduces_trl_gdpo_in_bf16_on_the_gpu(micro, tmp_path):  # noqa: F811
    """The same batch (same completions), the same token advantages, loss and gradients up to bf16 rounding:
    both trainers run the same bf16 autocast forward and backward; only the fp32 advantage arithmetic is ours."""
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from core.integrations.trl import MRTPOConfig, MRTPOTrainer, verifier_rewards

    path, tok, ds = micro
    fields = trl_fields(tmp_path, use_cpu=False, bf16=True)
    gdpo = GRPOTrainer(AutoModelForCausalLM.from_pretrained(path), reward_funcs=verifier_rewards(ds),
                       args=GRPOConfig(**fields), train_dataset=ds, processing_class=tok)
    mrtpo = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path),
                         args=MRTPOConfig(**fields, routing="uniform", runs_dir=None), train_dataset=ds,
                         processing_class=tok)
    out_g, loss_g, grad_g = one_batch(gdpo, ds)
    out_m, loss_m, grad_m = one_batch(mrtpo, ds)
    assert out_m["completion_ids"].is_cuda
    assert torch.equal(out_g["completion_ids"], out_m["completion_ids"])  # the same batch
    broadcast = out_g["advantages"][:, None] * out_m["completion_mask"]
    assert out_g["advantages"].abs().max() > 0.5  # a batch with signal in it
    torch.testing.assert_close(out_m["advantages"], broadcast, rtol=1e-5, atol=1e-6)  # fp32 on both sides
    torch.testing.assert_close(loss_m, loss_g, rtol=1e-3, atol=1e-5)
    for a, b in zip(grad_m, grad_g, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=1e-4)
