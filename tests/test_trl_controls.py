"""The controls of issue 42 (docs/METHOD.md, "Controls") on TRL: `mrtpo train --backend trl` trains two steps with
each, and MRTPOTrainer's scale-matched GDPO scales TRL-side GDPO's advantages on the same batch."""

from __future__ import annotations

import pytest
from test_trl import micro, needs_trl, one_batch, train_trl_cli, trl_args  # noqa: F401, F811 (micro: the fixture)

from core.run.store import RunStore
from core.tasks import load_prompt_set, reward_names

pytestmark = pytest.mark.trl


@needs_trl
@pytest.mark.parametrize("flags", [["--routing-shuffle", "on", "--routing-shuffle-seed", "3"],
                                   ["--routing", "entropy", "--entropy-q", "0.3"],
                                   ["--method", "gdpo", "--reward-scales", "SCALES"]],
                         ids=["shuffle", "entropy", "scale-matched-gdpo"])
def test_cli_backend_trl_trains_each_control(micro_model, prompt_file, tmp_path, flags, capsys):
    names = reward_names(load_prompt_set(prompt_file))
    flags = [f"{names[0]}=0.5" if f == "SCALES" else f for f in flags]
    code = train_trl_cli(micro_model, prompt_file, tmp_path, "ctl", flags)
    assert code == 0, capsys.readouterr()
    store = RunStore(tmp_path / "ctl")
    assert store.status()["state"] == "completed" and store.metrics()["step"].tolist() == [1, 2]
    cfg = store.config()
    if "--routing-shuffle" in flags:
        assert cfg["routing_shuffle"] == "on" and cfg["routing_shuffle_seed"] == 3  # recorded
    if "--routing" in flags:
        assert cfg["routing"] == "entropy" and cfg["entropy_q"] == 0.3
        assert store.metrics().filter(like="js/").isna().all().all()  # no replay ran
    if "--reward-scales" in flags:
        assert cfg["reward_scales"] == {names[0]: 0.5}


@needs_trl
def test_trainer_scale_matched_gdpo_halves_gdpo_on_the_same_batch(micro, tmp_path):  # noqa: F811
    import torch
    from transformers import AutoModelForCausalLM

    from core.integrations.trl import MRTPOTrainer

    path, tok, ds = micro
    plain = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, method="gdpo",
                         runs_dir=None), train_dataset=ds, processing_class=tok)
    scales = dict.fromkeys(plain.reward_names, 0.5)
    half = MRTPOTrainer(AutoModelForCausalLM.from_pretrained(path), args=trl_args(tmp_path, method="gdpo",
                        reward_scales=scales, runs_dir=None), train_dataset=ds, processing_class=tok)
    out_p, _, _ = one_batch(plain, ds)
    out_h, _, _ = one_batch(half, ds)
    assert torch.equal(out_p["completion_ids"], out_h["completion_ids"])  # the same batch
    assert out_p["advantages"].abs().max() > 0.5
    torch.testing.assert_close(out_h["advantages"], 0.5 * out_p["advantages"], rtol=1e-5, atol=1e-6)
