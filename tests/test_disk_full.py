"""A full disk (issue 45, class 2), on a real small filesystem (a tmpfs mounted for the test; skipped where this
process may not mount one) and, where noted, through a writer whose fsync raises ENOSPC: every write that does not fit
is one line naming what did not fit and about how much space it needed, the run ends `failed` with that reason, no
temporary file is left, nothing is left empty or torn, and a resume works once space is freed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_schema_1

from core.run import record
from core.run.store import DiskFull, RunStore, RunWriter, atomic_write_bytes, credit_path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}


@pytest.fixture
def small_disk(tmp_path):
    """make(size) -> a folder on a new tmpfs of `size` ("600k"); unmounted after the test."""
    mounts = []

    def make(size: str) -> Path:
        folder = tmp_path / f"disk{len(mounts)}"
        folder.mkdir()
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
        if out.returncode:
            pytest.skip(f"cannot mount a small tmpfs here ({out.stderr.strip()[:80]})")
        mounts.append(folder)
        return folder

    yield make
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def resize(folder: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """A file that takes every free byte of `folder`'s filesystem."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp" in p.name]


def test_an_atomic_write_that_does_not_fit_keeps_the_old_file_and_names_the_new(small_disk):
    disk = small_disk("64k")
    target = disk / "run" / "status.json"
    atomic_write_bytes(target, b"old")
    with pytest.raises(DiskFull, match=r"no space left on device: run/status\.json did not fit \(about 195 KiB "
                                       r"needed, \d+ KiB free in "):
        atomic_write_bytes(target, b"x" * 200_000)
    assert target.read_bytes() == b"old" and not leftovers(disk)


def test_an_atomic_write_whose_fsync_reports_enospc_leaves_no_temporary_file(tmp_path, monkeypatch):
    """The same through a patched fsync (runs where no filesystem can be mounted)."""
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "credit" / "step_000001.parquet"
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFull, match=r"credit/step_000001\.parquet did not fit \(about 10 KiB needed"):
        atomic_write_bytes(target, b"x" * 10_240)
    assert list(target.parent.iterdir()) == []


def test_a_metrics_line_that_does_not_fit_leaves_no_torn_line(small_disk):
    disk = small_disk("256k")
    w = RunWriter.create(disk, "r", {"steps": 2})
    w.append_metrics({"step": 1})
    before = (w.path / "metrics.jsonl").read_bytes()
    fill(disk)
    with pytest.raises(DiskFull, match=r"metrics\.jsonl did not fit \(about 20 KiB needed"):
        w.append_metrics({"step": 2, "x" * 20_000: 1.0})
    assert (w.path / "metrics.jsonl").read_bytes() == before
    w.close()


def _train(*args: str, code: str = "", timeout: int = 300) -> subprocess.CompletedProcess:
    """`mrtpo train ARGS` in another process, after running `code` there (a patch)."""
    script = f"import sys\n{code}\nfrom core.cli import main\nsys.exit(main(['train', *sys.argv[1:]]))\n"
    return subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def _args(micro_model, prompt_file, runs: Path, steps: int) -> list[str]:
    return ["--model", str(micro_model), "--prompt-set", str(prompt_file), "--runs-dir", str(runs), "--run-name",
            "r", "--steps", str(steps), "--group-size", "4", "--prompts-per-step", "2", "--max-new-tokens", "10",
            "--checkpoint-every", "1", "--keep-checkpoints", "0", "--device", "cpu"]


def _one_error_line(out: subprocess.CompletedProcess, pattern: str) -> str:
    import re

    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("mrtpo train: error: ")]
    assert len(errors) == 1 and re.search(pattern, errors[0]), out.stderr[-3000:]
    return errors[0][len("mrtpo train: error: "):]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_fails_the_run_in_one_line_and_resume_works_once_space_is_freed(
        small_disk, micro_model, prompt_file):
    """A disk with room for one checkpoint and not two (checkpoint = the model folder + AdamW's two moments)."""
    weights = (micro_model / "model.safetensors").stat().st_size
    one = sum(f.stat().st_size for f in micro_model.iterdir()) + 2 * weights
    disk = small_disk(f"{(int(1.5 * one) + 64 * 1024) // 4096 * 4}k")
    out = _train(*_args(micro_model, prompt_file, disk / "runs", 3))
    assert out.returncode == 1, out.stderr[-3000:]
    reason = _one_error_line(out, r"no space left on device: checkpoint step_000002 did not fit \(about \d+ KiB "
                                  r"needed, \d+ KiB free in .*\) at step 2; free space, then continue it from step 1")
    run = disk / "runs" / "r"
    status = json.loads((run / "status.json").read_text())
    assert (status["state"], status["step"], status["error"]) == ("failed", 2, reason)
    assert RunStore(run).status()["state"] == "failed" and not leftovers(run)
    assert [p.name for p in RunStore(run).checkpoints()] == ["step_000001"]
    resize(disk, "4m")
    out = _train("--resume", str(run))
    assert out.returncode == 0, out.stderr[-3000:]
    assert RunStore(run).status()["state"] == "completed" and RunStore(run).last_step() == 3


@pytest.mark.subprocess
def test_a_credit_map_that_does_not_fit_fails_the_run_in_one_line(small_disk, micro_model, prompt_file):
    """The step's credit map made 2 MB (a patched writer) on a 1 MB disk: the step is not recorded, no temp file."""
    disk = small_disk("1m")
    grow = ("import core.run.credit_format as cf\nreal = cf.write_bytes\n"
            "cf.write_bytes = lambda cs, key: real(cs, key) + bytes(2_000_000)\n")
    out = _train(*_args(micro_model, prompt_file, disk / "runs", 2), code=grow)
    assert out.returncode == 1, out.stderr[-3000:]
    reason = _one_error_line(out, r"credit/step_000001\.parquet did not fit \(about 1\.9 MiB needed, .* at step 1; "
                                  r"free space, then start it again \(it has no checkpoint")
    run = disk / "runs" / "r"
    assert RunStore(run).status()["state"] == "failed" and RunStore(run).status()["error"] == reason
    assert RunStore(run).last_step() == 0 and not leftovers(run)


def test_an_upgrade_on_a_full_disk_is_one_line_and_keeps_every_map(small_disk, capsys):
    from core import cli
    from core.tools.bench_store import make_record

    disk = small_disk("2m")
    w = RunWriter.create(disk, "old", {"steps": 2, "reward_names": []})
    frames = {}
    for s in (1, 2):
        rec = make_record(8, 16, 3, group_size=4, seed=s)
        rec.step = s
        frames[s] = record.credit_frame(rec)
        write_schema_1(w.path, frames[s])
        w.append_metrics({"step": s})
    w.set_status(state="completed", step=2)
    before = {s: credit_path(w.path, s).read_bytes() for s in frames}
    filler = fill(disk)
    assert cli.main(["upgrade", str(w.path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "step 1: no space left on device: credit/step_000001.parquet did not fit" in err
    assert {s: credit_path(w.path, s).read_bytes() for s in frames} == before and not leftovers(w.path)
    filler.unlink()
    assert cli.main(["upgrade", str(w.path)]) == 0
    assert RunStore(w.path).config()["schema_version"] == 3


def test_eval_out_json_on_a_full_disk_leaves_no_file(small_disk, tmp_path, capsys):
    from core.evaluate import ifeval

    prompts, responses = _eval_files(tmp_path, "rain falls softly.")
    disk = small_disk("64k")
    fill(disk)
    out = disk / "r.json"
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses), "--out-json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"No space left on device writing {out} (" in err, err
    assert not out.exists() and not leftovers(disk)


def test_eval_out_json_with_an_unencodable_response_is_written_whole(tmp_path):
    """A response holding a lone surrogate (a responses file's "\\ud800" escape) left a 0-byte report: now the
    report is JSON with \\u escapes, the same values."""
    from core.evaluate import ifeval

    prompts, responses = _eval_files(tmp_path, "rain \ud800 falls.")
    out = tmp_path / "r.json"
    assert ifeval.main(["--prompt-set", str(prompts), "--responses", str(responses), "--out-json", str(out)]) == 0
    assert json.loads(out.read_text())["prompts"][0]["response"] == "rain \ud800 falls."


def _eval_files(tmp_path: Path, response: str) -> tuple[Path, Path]:
    prompt = "Write about rain in lowercase."
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"key": "a", "prompt": prompt, "instruction_id_list":
                                   ["change_case:english_lowercase"], "kwargs": [{}]}) + "\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"prompt": prompt, "response": response}) + "\n")
    return prompts, responses
