"""`mrtpo bench efficiency`: the sample-efficiency study (GRPO, GDPO, MRTPO replay, MRTPO span).

    mrtpo bench efficiency --seeds 0 1 2 --steps 60 --eval-every 5 --out runs/efficiency
    mrtpo bench efficiency --quick                       # 1 seed, few steps, small eval: minutes on a CPU
    mrtpo bench efficiency --model PATH --methods gdpo mrtpo-replay --jobs 2
    mrtpo bench efficiency --setting multi --seeds 0 1 2 3 4 --steps 150 --out runs/efficiency-multi

Arms (`METHODS`): grpo, gdpo, mrtpo-replay (relevance js), mrtpo-span (oracle), mrtpo-js-specific, mrtpo-swap
and mrtpo-swap-specific (the default relevance); an arm whose relevance variant the trainer lacks is refused
with the reason (`arm_error`).

`--setting` picks the model, the prompt sets, the longest response and the default methods together
(`core.tools.promptgen.SETTINGS`): `tiny` (tiny-instruct on default.jsonl / heldout.jsonl, the first
study) or `multi` (tiny-multi on multi.jsonl / multi-heldout.jsonl: 4-6 constraints of four kinds per
prompt); `--model`, `--prompt-set`, `--heldout`, `--max-new-tokens`, `--methods` override it.

Every method trains on the same prompt set with the same budget (steps, G, prompts per step, lr,
max_new_tokens) and seeds; each run scores sampled responses (the trainer's `eval_samples` per prompt, fixed seed) to the first `--eval-prompts` prompts
of the held-out set every `--eval-every` steps (the trainer's `eval/...` metrics). The initial
model is scored once as well (step 0: the seed-0 evaluation of the initial weights stands for every method and seed).

Runs are ordinary run stores under `<out>/runs/` (open them with `mrtpo app --runs-dir <out>/runs`),
each trained by a `mrtpo train` subprocess with one thread (OMP_NUM_THREADS=1), `--jobs` at a time,
its output in `<out>/logs/<run>.log`. Rerunning the command reuses finished runs, resumes stopped
or crashed ones from their last checkpoint and extends finished ones when `--steps` grows; a run
whose recorded settings differ from the command's is refused (use another --out).

Writes `<out>/efficiency.csv` (long format: method, seed, step, metric, value; every numeric
training and eval metric of every run), then `mrtpo_viz.tools.efficiency_report` (run as a subprocess,
so this process never loads plotly) writes `efficiency.html`, `efficiency.md` (printed too) and,
when kaleido is importable, `efficiency.png`.

Never imports torch, streamlit or plotly at module level: the only torch code is the step-0
evaluation, which runs in a child process (`python -m core.tools.efficiency _initial-eval ...`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from core.config import MODEL_PRESETS, RELEVANCES, ConfigError, TrainConfig, resume_argv, train_argv
from core.paths import PROMPTS_DIR, REPO_ROOT, resolve_path
from core.presets import EMBEDDED_MODELS, missing_model_hint
from core.run.liveness import pid_alive
from core.run.store import ACTIVE_STATES, RunStore, run_dir
from core.run.train_log import read_tail
from core.tools.promptgen import SETTINGS, get_setting

# Study label -> the TrainConfig fields that make the method. One place knows the names.
# The arms of studies v1 and v2 were trained with clipped routing weights (routing_clip "clip", the only behaviour
# then); they keep it so their recorded runs stay reusable.
METHODS: dict[str, dict[str, str]] = {
    "grpo": {"method": "grpo"},
    "gdpo": {"method": "gdpo"},
    "mrtpo-replay": {"method": "mrtpo", "routing": "replay", "relevance": "js", "routing_clip": "clip"},
    "mrtpo-span": {"method": "mrtpo", "routing": "span", "routing_clip": "clip"},
    "mrtpo-js-specific": {"method": "mrtpo", "routing": "replay", "relevance": "js_specific", "routing_clip": "clip"},
    # Study v2's swap arm: relevance from swapped counterfactual prompts (the `swap` variant of
    # core.algos.routing.RELEVANCE). A checkout whose trainer lacks that variant refuses the arm (`arm_error`).
    "mrtpo-swap": {"method": "mrtpo", "routing": "replay", "relevance": "swap", "routing_clip": "clip"},
    # The default relevance of issues 12-28, chosen by the faithfulness benchmark.
    "mrtpo-swap-specific": {"method": "mrtpo", "routing": "replay", "relevance": "swap_specific",
                            "routing_clip": "clip"},
    # Study v3's arms (docs/results/study-v3.md): js as in study v2 (clipped weights), js with the weights that keep
    # each reward's mass, and auto (swap only for the families whose argument the policy reads).
    "mrtpo-js": {"method": "mrtpo", "routing": "replay", "relevance": "js", "routing_clip": "clip"},
    "mrtpo-js-mass": {"method": "mrtpo", "routing": "replay", "relevance": "js", "routing_clip": "mass"},
    "mrtpo-auto": {"method": "mrtpo", "routing": "replay", "relevance": "auto", "routing_clip": "clip"},
}


def arm_error(method: str) -> str:
    """Why the study cannot train arm `method` with this checkout's trainer ("" when it can): an arm whose
    relevance variant is not among the trainer's (`core.config.RELEVANCES`)."""
    relevance = METHODS[method].get("relevance", "js")
    if relevance in RELEVANCES:
        return ""
    return (f"arm {method} needs the relevance variant {relevance!r}, which this checkout's trainer does not have "
            f"(its variants: {', '.join(RELEVANCES)}); it comes with the relevance variants of issue 12 "
            f"(core/algos/routing.py RELEVANCE). Leave {method} out of --methods until then.")


# The methods a study of each setting trains unless --methods says otherwise (tiny: the first study's four;
# multi: study v2's: js, the default relevance swap_specific, and swap).
SETTING_METHODS: dict[str, list[str]] = {
    "tiny": ["grpo", "gdpo", "mrtpo-replay", "mrtpo-span"],
    "multi": ["grpo", "gdpo", "mrtpo-replay", "mrtpo-swap-specific", "mrtpo-swap"],
}
# Study v3 (docs/results/study-v3.md, fixed before it ran): `--study v3` sets these unless a flag overrides them.
STUDY_V3 = {"setting": "multi", "methods": ["gdpo", "mrtpo-js", "mrtpo-js-mass", "mrtpo-auto"], "steps": 150,
            "eval_every": 10, "eval_prompts": 128, "seeds": list(range(12)),
            "heldout": str(PROMPTS_DIR / "multi-heldout-128.jsonl")}
# Fields a run recorded before they existed was trained with (core.config.TrainConfig.from_dict does the same).
LEGACY_FIELDS = {"routing_clip": "clip"}
# Settings a recorded run may differ in and still be reused: how long it ran (extended by resuming),
# where and with how many samples per forward pass it ran, which JS maps replay recorded (the training is the
# same), and the folder it lies in.
FREE_FIELDS = ("steps", "device", "replay_chunk", "replay_pairs", "runs_dir", "run_name")
CSV_COLUMNS = ["method", "seed", "step", "metric", "value"]

FULL_DEFAULTS = {"seeds": [0, 1, 2], "steps": 60, "eval_every": 5, "eval_prompts": 32, "jobs": 1}
# --quick: one seed, a short budget, a small eval; measured under 5 minutes on a 2-core CPU (see --help).
QUICK_DEFAULTS = {"seeds": [0], "steps": 20, "eval_every": 5, "eval_prompts": 16, "group_size": 4,
                  "prompts_per_step": 2, "jobs": 2}


# ---------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class RunSpec:
    """One training run of the study: a method label, a seed and the full TrainConfig fields."""

    method: str
    seed: int
    fields: dict[str, Any] = field(hash=False)

    @property
    def name(self) -> str:
        return f"{self.method}-s{self.seed}"


def _model_field(model: str) -> str:
    """A preset stays a preset; a folder becomes absolute (the runs must find it from anywhere)."""
    return model if model in MODEL_PRESETS else str(resolve_path(model).resolve())


def count_prompts(path: str) -> int:
    """Prompts in a JSONL prompt set (its non-blank lines)."""
    with open(path, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def plan_runs(args: argparse.Namespace) -> list[RunSpec]:
    """Every (method, seed) run with its TrainConfig fields; the same budget for every method."""
    runs_dir = str((Path(args.out) / "runs").resolve())
    common = {
        "model": _model_field(args.model),
        "prompt_set": str(resolve_path(args.prompt_set).resolve()),
        "eval_prompt_set": str(resolve_path(args.heldout).resolve()),
        "eval_prompts": args.eval_prompts,
        "steps": args.steps,
        "group_size": args.group_size,
        "prompts_per_step": args.prompts_per_step,
        "lr": args.lr,
        "max_new_tokens": args.max_new_tokens,
        "checkpoint_every": args.eval_every,  # the trainer evaluates at every checkpoint (and the last step)
        "device": args.device,
        "runs_dir": runs_dir,
    }
    refused = [e for method in args.methods if (e := arm_error(method))]
    if refused:
        raise ConfigError("methods", "; ".join(refused))
    n_heldout = count_prompts(common["eval_prompt_set"])
    if n_heldout < args.eval_prompts:
        raise ConfigError("eval_prompts", f"--eval-prompts {args.eval_prompts} but {Path(args.heldout).name} holds "
                                          f"{n_heldout} prompts (the evaluation would score only those); use at most "
                                          f"{n_heldout} or a larger held-out set")
    specs = []
    for method in args.methods:
        for seed in args.seeds:
            fields = {**common, **METHODS[method], "seed": seed}
            spec = RunSpec(method, seed, fields)
            fields["run_name"] = spec.name
            TrainConfig(**fields)  # validate every value before anything starts
            specs.append(spec)
    return specs


# ---------------------------------------------------------------------------------------------- run state


@dataclass
class Decision:
    """What to do with one planned run: new | reuse | resume | conflict | busy, and why."""

    action: str
    reason: str = ""


def config_conflicts(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Fields (outside FREE_FIELDS) whose recorded value differs from the study's, as 'field: old != new'."""
    out = []
    for key, value in wanted.items():
        if key in FREE_FIELDS:
            continue
        old = recorded.get(key, LEGACY_FIELDS.get(key))
        if old != value and not same_repo_file(old, value):
            out.append(f"{key}: {recorded.get(key)!r} != {value!r}")
    return out


# Fields holding a file path: a study folder carried to another checkout (another machine, another repo root) records
# the same repository file under another absolute path.
PATH_FIELDS = ("model", "prompt_set", "eval_prompt_set")


def same_repo_file(recorded: Any, wanted: Any) -> bool:
    """True when `wanted` is a file inside this checkout (REPO_ROOT) and `recorded` is an absolute path ending in the
    same repository-relative path (the study ran in another checkout of the repository)."""
    if not isinstance(recorded, str) or not isinstance(wanted, str):
        return False
    try:
        rel = Path(wanted).resolve().relative_to(REPO_ROOT.resolve()).as_posix()
    except ValueError:
        return False
    return Path(recorded).is_absolute() and Path(recorded).as_posix().endswith("/" + rel)


def decide(spec: RunSpec, model_id: str | None = None, recorded_id: str | None = None) -> Decision:
    """Reuse a finished run, resume an unfinished one, start a missing one; refuse one made with other settings
    or (when both identities are known) from other model weights."""
    path = run_dir(spec.fields["runs_dir"], spec.name)
    if not path.exists():
        return Decision("new")
    if model_id and recorded_id and model_id != recorded_id:
        return Decision("conflict", f"{path} was trained from other weights of {spec.fields['model']} (the model "
                                    "was rebuilt since); use another --out or remove the run")
    store = RunStore(path)
    recorded = store.config()
    if not recorded:
        return Decision("conflict", f"{path} exists but its config.json is unreadable; remove the folder")
    conflicts = config_conflicts(recorded, spec.fields)
    if conflicts:
        return Decision("conflict", f"{path} was trained with other settings ({'; '.join(conflicts)}); "
                                    "use another --out or the same settings")
    status = store.status()
    if status.get("state") in ACTIVE_STATES and pid_alive(status.get("pid")):
        return Decision("busy", f"{path} is being trained by pid {status.get('pid')}")
    metrics = store.metrics()
    done = int(metrics["step"].max()) if len(metrics) else 0
    if status.get("state") == "completed" and done >= spec.fields["steps"]:
        return Decision("reuse", f"completed, {done} steps")
    return Decision("resume", f"{status.get('state')} after {done} of {spec.fields['steps']} steps")


def model_identity(model: str) -> str | None:
    """sha256 over the model folder's weight files (name and bytes, in name order), or None when the model is
    not a local folder (the smollm2 preset). Tells a rebuilt tiny-instruct from the one a run was trained on."""
    folder = EMBEDDED_MODELS[model][0] if model in EMBEDDED_MODELS else Path(model)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    if not folder.is_dir() or not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class ModelIds:
    """<out>/model_ids.json: run name -> identity of the model it was trained from (checked before reuse)."""

    def __init__(self, out: Path):
        self.path = out / "model_ids.json"
        self.lock = threading.Lock()
        try:
            self.ids: dict[str, str] = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.ids = {}

    def get(self, name: str) -> str | None:
        return self.ids.get(name)

    def set(self, name: str, identity: str | None) -> None:
        if identity is None:
            return
        with self.lock:
            self.ids[name] = identity
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.ids, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def prune_checkpoints(path: Path) -> int:
    """Delete every checkpoint of a finished run except the newest (kept so --steps can extend it); returns
    how many were removed. The study reads only metrics, and a 135M model's checkpoint is 1.5 GB."""
    ckpts = RunStore(path).checkpoints()
    for old in ckpts[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    return max(len(ckpts) - 1, 0)


# ---------------------------------------------------------------------------------------------- subprocesses


def child_env() -> dict[str, str]:
    """One thread per training process (torch reads OMP_NUM_THREADS at start), `core` importable from anywhere."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def train_command(spec: RunSpec, decision: Decision) -> list[str]:
    """The `mrtpo train` command of a planned run: a new run from its fields, or resuming its folder."""
    if decision.action == "resume":
        path = run_dir(spec.fields["runs_dir"], spec.name)
        return resume_argv(path, steps=spec.fields["steps"], device=spec.fields["device"])
    return train_argv(TrainConfig(**spec.fields))


class Children:
    """The training subprocesses. Each runs in its own session, so a Ctrl-C reaches only this process,
    which then sends every child one SIGTERM: the trainer finishes or abandons its step, saves and marks
    the run stopped (a second signal would kill it before that)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.stopping = False

    def run(self, cmd: list[str], **kwargs) -> int:
        with self.lock:
            if self.stopping:
                return -signal.SIGTERM
            proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
            self.live.add(proc)
        try:
            return proc.wait()
        finally:
            with self.lock:
                self.live.discard(proc)

    def stop_all(self) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.live:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)


CHILDREN = Children()


@dataclass
class Outcome:
    spec: RunSpec
    decision: Decision
    state: str
    seconds: float
    message: str = ""


class Progress:
    """Thread-safe progress lines: one when a run starts, one when it ends."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.stream = stream or sys.stdout
        self.start = time.monotonic()

    def say(self, text: str, finished: bool = False) -> None:
        with self.lock:
            if finished:
                self.done += 1
            elapsed = time.monotonic() - self.start
            self.stream.write(f"[{self.done}/{self.total} done, {elapsed:5.0f}s] {text}\n")
            self.stream.flush()


def summarize_run(path: Path) -> str:
    """'6 steps, 4.1 s/step, held-out all-satisfied 0.25 at step 6' from a run store."""
    m = RunStore(path).metrics()
    if not len(m):
        return "no completed step"
    parts = [f"{int(m['step'].max())} steps"]
    if "time/step" in m:
        parts.append(f"{pd.to_numeric(m['time/step'], errors='coerce').mean():.1f} s/step")
    if "eval/all_satisfied" in m:
        ev = m[["step", "eval/all_satisfied"]].dropna()
        if len(ev):
            parts.append(f"held-out all-satisfied {ev['eval/all_satisfied'].iloc[-1]:.2f} at step {ev['step'].iloc[-1]}")
    return ", ".join(parts)


def run_one(spec: RunSpec, decision: Decision, out: Path, progress: Progress, keep_checkpoints: bool,
            model_ids: ModelIds, model_id: str | None) -> Outcome:
    """Train (or resume) one run in a `mrtpo train` subprocess; its output goes to <out>/logs/<run>.log."""
    path = run_dir(spec.fields["runs_dir"], spec.name)
    model_ids.set(spec.name, model_id)
    log_file = out / "logs" / f"{spec.name}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    cmd = train_command(spec, decision)
    progress.say(f"{spec.name}: start ({decision.action}{': ' + decision.reason if decision.reason else ''})")
    t0 = time.monotonic()
    with open(log_file, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        rc = CHILDREN.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=str(REPO_ROOT))
    seconds = time.monotonic() - t0
    state = RunStore(path).status().get("state", "missing") if path.exists() else "missing"
    if state == "completed":
        if not keep_checkpoints:
            prune_checkpoints(path)
        message = summarize_run(path)
    elif state == "stopped":
        message = f"{summarize_run(path)}; rerun the command to resume it"
    else:
        tail = read_tail(log_file, 3).replace("\n", "\n    ")
        message = f"exit {rc}, state {state}; see {log_file}" + (f"\n    {tail}" if tail else "")
    progress.say(f"{spec.name}: {state} in {seconds:.0f} s ({message})", finished=True)
    return Outcome(spec, decision, state, seconds, message)


# ---------------------------------------------------------------------------------------------- step 0


def initial_eval(spec: RunSpec, out: Path) -> dict[str, float]:
    """Held-out metrics of the untrained model (step 0), computed once per model/eval set/length and cached.

    The same initial weights give the same responses for every method (the eval seed is fixed), and the
    evaluation of the first spec's seed stands for every seed (the others differ only by sampling noise).
    """
    keys = ("model", "eval_prompt_set", "max_new_tokens", "prompt_set")
    fingerprint = {**{k: spec.fields[k] for k in keys}, "model_id": model_identity(spec.fields["model"])}
    cache = out / "initial_eval.json"
    if cache.exists():
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("fingerprint") == fingerprint:
                return {k: float("nan") if v is None else float(v) for k, v in data["metrics"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            pass
    config_file = out / "configs" / "initial-eval.json"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(json.dumps({**spec.fields, "run_name": ""}, indent=2) + "\n", encoding="utf-8")
    log_file = out / "logs" / "initial-eval.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out / ".initial_eval.tmp.json"
    with open(log_file, "w", encoding="utf-8") as log:
        rc = subprocess.call([sys.executable, "-m", "core.tools.efficiency", "_initial-eval", str(config_file), str(tmp)],
                             stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=str(REPO_ROOT))
    if rc != 0 or not tmp.exists():
        tail = read_tail(log_file, 5).replace("\n", "\n    ")
        raise RuntimeError(f"the step-0 evaluation failed (exit {rc}); see {log_file}:\n    {tail}")
    metrics = json.loads(tmp.read_text(encoding="utf-8"))
    tmp.unlink()
    cache.write_text(json.dumps({"fingerprint": fingerprint, "metrics": metrics}, indent=2) + "\n", encoding="utf-8")
    return {k: float("nan") if v is None else float(v) for k, v in metrics.items()}


def _initial_eval_child(config_file: str, out_file: str) -> int:
    """Child process: load the policy as the trainer does and run the trainer's own evaluation."""
    import torch  # only in this child process

    from core.run import lifecycle
    from core.run import step as step_lib

    torch.set_num_threads(1)
    cfg = TrainConfig.from_json(config_file)
    state = lifecycle.build_state(cfg)
    t0 = time.perf_counter()
    metrics = step_lib.evaluate(state)
    print(f"step-0 evaluation of {cfg.model} on {cfg.eval_prompt_set}: {time.perf_counter() - t0:.1f} s", flush=True)
    clean = {k: (None if v != v else float(v)) for k, v in metrics.items()}  # NaN -> null
    Path(out_file).write_text(json.dumps(clean) + "\n", encoding="utf-8")
    return 0


# ---------------------------------------------------------------------------------------------- results


def collect(specs: list[RunSpec], initial: dict[str, float] | None = None) -> pd.DataFrame:
    """Long table (method, seed, step, metric, value) of every numeric metric of every run, steps 1..steps.

    `initial` (the step-0 held-out metrics) is added at step 0 of every run that completed a step.
    NaN values (a reward that applied to no sample) are left out.
    """
    frames = []
    for spec in specs:
        path = run_dir(spec.fields["runs_dir"], spec.name)
        if not path.exists():
            continue
        m = RunStore(path).metrics()
        m = m[m["step"] <= spec.fields["steps"]]
        if not len(m):
            continue
        long = m.melt(id_vars="step", var_name="metric", value_name="value")
        long["value"] = pd.to_numeric(long["value"], errors="coerce")
        if initial:
            long = pd.concat([pd.DataFrame({"step": 0, "metric": list(initial), "value": list(initial.values())}),
                              long], ignore_index=True)
        long = long.dropna(subset=["value"])
        long.insert(0, "seed", spec.seed)
        long.insert(0, "method", spec.method)
        frames.append(long)
    if not frames:
        return pd.DataFrame(columns=CSV_COLUMNS)
    df = pd.concat(frames, ignore_index=True)[CSV_COLUMNS]
    df["step"] = df["step"].astype("int64")
    # Stable: inside a step the metrics keep the trainer's order (rewards in the prompt set's order).
    return df.sort_values(["method", "seed", "step"], kind="stable").reset_index(drop=True)


def _reward_names(spec: RunSpec) -> list[str]:
    path = run_dir(spec.fields["runs_dir"], spec.name)
    return RunStore(path).reward_names() if (path / "config.json").exists() else []


def write_study(out: Path, args: argparse.Namespace, specs: list[RunSpec]) -> Path:
    """<out>/study.json: the study's settings and reward names, which the report uses for its text and order."""
    keys = ("model", "methods", "seeds", "steps", "group_size", "prompts_per_step", "lr", "max_new_tokens",
            "eval_every", "eval_prompts", "device", "jobs")
    study: dict[str, Any] = {k: getattr(args, k) for k in keys}
    study["eval_prompt_set"] = Path(args.heldout).name
    study["reward_names"] = next((names for s in specs if (names := _reward_names(s))), [])
    path = out / "study.json"
    path.write_text(json.dumps(study, indent=2) + "\n", encoding="utf-8")
    return path


def write_report(csv: Path, out: Path, targets: list[float], band: str) -> int:
    """Run mrtpo_viz.tools.efficiency_report in a child process (plotly stays out of this one); it prints the table.
    Without plotly (a training machine may lack it) the report is skipped with a note, not an error: the CSV and
    endpoints.md are written anyway, and `--collect-only` on a machine with plotly writes the report later."""
    if importlib.util.find_spec("plotly") is None:
        print("efficiency report skipped: plotly is not installed here (efficiency.csv and endpoints.md are written; "
              "rerun with --collect-only where plotly is installed for efficiency.md/.html)", flush=True)
        return 0
    cmd = [sys.executable, "-m", "mrtpo_viz.tools.efficiency_report", str(csv), "--out", str(out), "--band", band,
           "--targets", *map(str, targets)]
    sys.stdout.flush()
    return subprocess.call(cmd, env=child_env(), cwd=str(REPO_ROOT))


def write_endpoints(csv: Path, out: Path, planned_seeds: int | None = None) -> int:
    """`core.tools.study_endpoints` on the study's CSV: endpoints.md (paired t against GDPO, Holm over the MRTPO
    arms' primary endpoint) and endpoints.csv; printed after the report. `planned_seeds`: the pre-registered seed
    count (study v3: 12), so a report of fewer seeds says it is interim and gives no verdict."""
    cmd = [sys.executable, "-m", "core.tools.study_endpoints", str(csv), "--out", str(out)]
    if planned_seeds:
        cmd += ["--planned-seeds", str(planned_seeds)]
    sys.stdout.flush()
    return subprocess.call(cmd, env=child_env(), cwd=str(REPO_ROOT))


# ---------------------------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mrtpo bench efficiency",
        description="Sample-efficiency study: GRPO, GDPO, MRTPO (replay routing) and MRTPO (span routing, the "
        "oracle) with the same budget and seeds, evaluated on held-out prompts; writes efficiency.csv, "
        "efficiency.html, efficiency.md (and efficiency.png when kaleido is installed).",
        epilog="--quick (1 seed, 20 steps, G=4 x 2 prompts, 16 held-out prompts every 5 steps, 2 jobs) is meant to finish "
        "in under 5 minutes on a 2-core CPU with tiny-instruct; flags given with --quick override its values.",
    )
    p.add_argument("--out", default="runs/efficiency", help="study folder: runs/, logs/, reports (default: %(default)s)")
    p.add_argument("--setting", choices=list(SETTINGS),
                   help="model, prompt sets, longest response and methods of the study (default: tiny; "
                   "multi: tiny-multi on multi.jsonl, 4-6 constraints of four kinds per prompt)")
    p.add_argument("--model", help="preset or local model folder (default: the setting's model)")
    p.add_argument("--methods", nargs="+", choices=list(METHODS), metavar="METHOD",
                   help="methods to train, of " + ", ".join(METHODS) + " (default: the setting's: " + "; ".join(
                       f"{k}: {' '.join(v)}" for k, v in SETTING_METHODS.items()) + ")")
    p.add_argument("--seeds", nargs="+", type=int, help=f"seeds (default: {FULL_DEFAULTS['seeds']})")
    p.add_argument("--steps", type=int, help=f"optimizer steps per run (default: {FULL_DEFAULTS['steps']})")
    p.add_argument("--eval-every", type=int, help=f"held-out evaluation every N steps (default: "
                   f"{FULL_DEFAULTS['eval_every']}; also at the last step and, once, before training)")
    p.add_argument("--eval-prompts", type=int, help=f"first N held-out prompts to score (default: "
                   f"{FULL_DEFAULTS['eval_prompts']})")
    p.add_argument("--prompt-set", help="training prompt set (default: the setting's, e.g. sample_data/prompts/default.jsonl)")
    p.add_argument("--heldout", help="held-out prompt set (default: the setting's, e.g. sample_data/prompts/heldout.jsonl)")
    p.add_argument("--group-size", type=int, help="G, responses per prompt (default: the trainer's, 8)")
    p.add_argument("--prompts-per-step", type=int, help="prompts per step (default: the trainer's, 4)")
    p.add_argument("--lr", type=float, help="learning rate (default: the trainer's)")
    p.add_argument("--max-new-tokens", type=int, help="longest response (default: the setting's, else the trainer's)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--jobs", type=int, help="runs trained at once, one thread each (default: 1; 2 with --quick)")
    p.add_argument("--targets", nargs="+", type=float, default=[0.2, 0.3, 0.4],
                   help="held-out all-satisfied rates for the steps-to-target table (default: %(default)s)")
    p.add_argument("--band", choices=("minmax", "std"), default="minmax",
                   help="spread drawn around the mean over seeds (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="a small study that takes minutes (see below)")
    p.add_argument("--study", choices=("v3",), help="a pre-registered study's settings (v3: docs/results/study-v3.md: "
                   "multi, gdpo mrtpo-js mrtpo-js-mass mrtpo-auto, 150 steps, 128 held-out prompts of multi-heldout-128.jsonl "
                   "every 10 steps, "
                   "seeds 0-11); flags given override them")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep every checkpoint of finished runs (default: only the last)")
    p.add_argument("--no-initial-eval", action="store_true", help="skip the step-0 evaluation of the initial model")
    p.add_argument("--collect-only", action="store_true",
                   help="train nothing: collect the runs as they are (finished or not), write the CSV and the reports")
    return p


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    """Fill unset flags from the setting, from --quick or the full-study defaults, then the trainer's own defaults."""
    if getattr(args, "study", None) == "v3":
        for key, value in STUDY_V3.items():
            if getattr(args, key, None) is None:
                setattr(args, key, value)
    setting = get_setting(getattr(args, "setting", None) or "tiny")
    args.setting = setting.name
    for key, value in (("model", setting.model), ("prompt_set", str(PROMPTS_DIR / setting.files[0])),
                       ("heldout", str(PROMPTS_DIR / setting.files[1])), ("max_new_tokens", setting.max_new_tokens),
                       ("methods", SETTING_METHODS[setting.name])):
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    preset = {**FULL_DEFAULTS, **(QUICK_DEFAULTS if args.quick else {})}
    trainer_defaults = TrainConfig()
    for key in ("seeds", "steps", "eval_every", "eval_prompts", "group_size", "prompts_per_step", "lr",
                "max_new_tokens", "jobs"):
        if getattr(args, key, None) is None:
            value = preset.get(key, getattr(trainer_defaults, key, None))
            setattr(args, key, value)
    args.seeds = list(dict.fromkeys(args.seeds))
    args.methods = list(dict.fromkeys(args.methods))
    return args


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_initial-eval"]:
        return _initial_eval_child(*argv[1:3])
    args = resolve_args(build_parser().parse_args(argv))
    if threading.current_thread() is not threading.main_thread():
        return run_study(args)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill PID` stops the study like Ctrl-C
    try:
        return run_study(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_study(args: argparse.Namespace) -> int:
    """Plan, train what is missing, collect, report (exit status: 0 ok, 1 a run failed, 2 bad settings)."""
    for name in ("steps", "eval_every", "eval_prompts", "jobs"):
        if getattr(args, name) < 1:
            print(f"mrtpo bench efficiency: --{name.replace('_', '-')} must be >= 1", file=sys.stderr)
            return 2
    out = Path(args.out).resolve()
    try:
        specs = plan_runs(args)
    except (ConfigError, OSError) as exc:
        print(f"mrtpo bench efficiency: {exc}{missing_model_hint(exc)}", file=sys.stderr)
        return 2
    model_id = model_identity(specs[0].fields["model"])
    model_ids = ModelIds(out)
    decisions = {spec.name: decide(spec, model_id, model_ids.get(spec.name)) for spec in specs}
    refused = [f"  {name}: {d.reason}" for name, d in decisions.items() if d.action in ("conflict", "busy")]
    if refused:
        print("mrtpo bench efficiency: cannot use these runs:\n" + "\n".join(refused), file=sys.stderr)
        return 2
    todo = [s for s in specs if decisions[s.name].action != "reuse" and not args.collect_only]
    # Seed by seed (every arm of a seed before the next seed): a study stopped by a time budget leaves whole seeds,
    # which the paired analysis can use, rather than every seed of the first arms.
    todo.sort(key=lambda s: args.seeds.index(s.seed))
    print(f"efficiency study in {out}: {len(args.methods)} methods x {len(args.seeds)} seeds, {args.steps} steps "
          f"(G={args.group_size} x {args.prompts_per_step} prompts, lr {args.lr:g}, max_new_tokens "
          f"{args.max_new_tokens}), held-out eval of the first {args.eval_prompts} prompts of {Path(args.heldout).name} every {args.eval_every} steps; "
          f"{len(specs) - len(todo)} runs reused, {len(todo)} to train with {args.jobs} job(s)", flush=True)
    t0 = time.monotonic()
    initial = None
    if not args.no_initial_eval and not (args.collect_only and not (out / "initial_eval.json").exists()):
        try:
            initial = initial_eval(specs[0], out)
        except RuntimeError as exc:
            print(f"mrtpo bench efficiency: {exc}", file=sys.stderr)
            return 1
        print(f"step 0 (initial model): held-out all-satisfied {initial.get('eval/all_satisfied', float('nan')):.3f}",
              flush=True)
    progress = Progress(len(todo))
    failed: list[Outcome] = []
    if todo:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, s, decisions[s.name], out, progress, args.keep_checkpoints, model_ids,
                                   model_id) for s in todo]
            try:
                outcomes = [f.result() for f in futures]
            except KeyboardInterrupt:
                for f in futures:
                    f.cancel()
                CHILDREN.stop_all()  # they save and mark their runs stopped; the pool waits for them
                print("interrupted: stopping the runs; rerun the same command to resume them", file=sys.stderr)
                return 130
        failed = [o for o in outcomes if o.state != "completed"]
    for spec in specs:
        if decisions[spec.name].action == "reuse" and not args.keep_checkpoints:
            prune_checkpoints(run_dir(spec.fields["runs_dir"], spec.name))
    df = collect(specs, initial)
    out.mkdir(parents=True, exist_ok=True)  # --collect-only on a study with no run yet
    write_study(out, args, specs)
    csv = out / "efficiency.csv"
    df.to_csv(csv, index=False)
    print(f"\n{len(df)} rows -> {csv} (training took {time.monotonic() - t0:.0f} s)\n", flush=True)
    rc = write_report(csv, out, args.targets, args.band)
    planned = len(STUDY_V3["seeds"]) if getattr(args, "study", None) == "v3" else None
    rc = write_endpoints(csv, out, planned) or rc
    if failed:
        print(f"{len(failed)} run(s) did not complete: {', '.join(o.spec.name for o in failed)} "
              "(rerun the command to resume them)", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
