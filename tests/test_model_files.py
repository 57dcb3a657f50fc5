"""Model folders whose safetensors header is malformed are refused with one line, before torch reads them:
by the config check (so `mrtpo train` exits 2 and the Launch form shows the field's error) and by the loader."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import field_error
from core.presets import EMBEDDED_MODELS
from core.resources import model_shape, read_safetensors_header, safetensors_parameters

ROOT = Path(__file__).resolve().parent.parent


def write_safetensors(path: Path, header: dict | str, data: bytes = b"\0" * 20) -> Path:
    raw = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def model_folder(tmp_path: Path, header: dict | str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    write_safetensors(folder / "model.safetensors", header)
    return folder


GOOD = {"w": {"dtype": "F32", "shape": [5], "data_offsets": [0, 20]}}
BAD = {  # the probe's cases, and offsets past the data
    "shape-number": ('{"w": {"dtype": "F32", "shape": 5, "data_offsets": [0, 20]}}', "has shape 5"),
    "shape-overflow": ('{"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 20]}}', "has shape [inf]"),
    "shape-text": ('{"w": {"dtype": "F32", "shape": ["x"], "data_offsets": [0, 20]}}', "has shape ['x']"),
    "offsets": ({"w": {"dtype": "F32", "shape": [5], "data_offsets": [0, 400]}}, "outside the file's 20 data bytes"),
    "dtype": ({"w": {"dtype": "Q9", "shape": [5], "data_offsets": [0, 20]}}, "unknown dtype 'Q9'"),
    "not-json": ("{w", "header is not JSON"),
}


def test_a_good_header_reads_and_counts_its_weights(tmp_path):
    folder = model_folder(tmp_path, GOOD)
    assert read_safetensors_header(folder / "model.safetensors")["w"]["shape"] == [5]
    assert safetensors_parameters(folder) == 5
    assert field_error("model", str(folder)) == ""


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_header_is_one_line_from_the_config_check(tmp_path, case):
    header, says = BAD[case]
    folder = model_folder(tmp_path, header)
    message = field_error("model", str(folder))
    assert "model.safetensors" in message and says in message and "\n" not in message
    assert safetensors_parameters(folder) is None  # the memory estimate skips it instead of raising
    assert model_shape(str(folder)) is None  # what the Launch form's memory line asks (it raised TypeError)


def test_a_short_file_is_not_a_safetensors_file(tmp_path):
    folder = model_folder(tmp_path, GOOD)
    (folder / "model.safetensors").write_bytes(b"\1\2")
    assert "not a safetensors file" in field_error("model", str(folder))


@pytest.mark.subprocess
def test_mrtpo_train_exits_2_with_one_line_before_loading_torch(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(EMBEDDED_MODELS["tiny-instruct"][0], folder)
    for weights in folder.glob("*.safetensors"):
        write_safetensors(weights, BAD["shape-overflow"][0])
    out = subprocess.run([sys.executable, "-m", "core.cli", "train", "--model", str(folder), "--steps", "1",
                          "--runs-dir", str(tmp_path / "runs")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.safetensors" in lines[0] and "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists()


def test_the_loader_refuses_it_too(tmp_path):
    from core.model import ModelLoadError, resolve_model

    folder = model_folder(tmp_path, BAD["shape-text"][0])
    with pytest.raises(ModelLoadError, match="has shape"):
        resolve_model(str(folder))
