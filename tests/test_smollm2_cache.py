"""The SmolLM2 preset's converted cache (core/model.py:smollm2_folder): processes starting together convert once,
and none replaces the folder while another reads it."""

from __future__ import annotations

import json
import threading
import time

from core import model as model_lib


def test_starting_together_converts_once(tmp_path, monkeypatch):
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"gguf")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(model_lib, "smollm2_gguf_path", lambda: gguf)
    calls: list[float] = []

    def fake_convert(src, out):  # as slow as a real conversion is long next to the check
        calls.append(time.time())
        time.sleep(0.3)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "mrtpo_source.json").write_text(json.dumps(model_lib._smollm2_source_stamp(src)))

    monkeypatch.setattr(model_lib, "convert_smollm2", fake_convert)
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(model_lib.smollm2_folder())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(converted for _, converted in results) == [False, False, True]
    assert model_lib.smollm2_folder() == (tmp_path / "cache" / model_lib.SMOLLM2_CACHE_NAME, False)
    # the wheel's file changed: converted again
    gguf.write_bytes(b"gguf, a newer one")
    import shutil
    shutil.rmtree(tmp_path / "cache" / model_lib.SMOLLM2_CACHE_NAME)
    assert model_lib.smollm2_folder()[1] is True and len(calls) == 2
