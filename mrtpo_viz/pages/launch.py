"""Launch: a form for a training run. Valid values start `mrtpo train` as a separate process; each
problem is shown next to its field and nothing starts. Active runs (also those started before the
app restarted) show progress and a Stop button; a crashed run shows its error and log tail."""

from __future__ import annotations

import streamlit as st

from core.config import DEVICES, METHODS, MODEL_PRESETS, RELEVANCES, ROUTINGS, ConfigError, TrainConfig, resolve_path
from core.store import ACTIVE_STATES
from core.tasks import load_prompt_set, reward_names
from mrtpo_viz import launcher, loaders, ui
from mrtpo_viz.paths import REPO_ROOT, runs_dir

ERRORS_KEY = "launch_errors"
LAUNCHED_KEY = ui.LAUNCHED_KEY
PREFIX = "lf_"  # widget keys of the form: lf_<TrainConfig field>
WEIGHT_PREFIX = "lfw_"  # reward weight inputs: lfw_<reward name> (apart from lf_w_max)
DEFAULTS = TrainConfig()


@st.cache_data(show_spinner=False)
def prompt_set_rewards(path: str, key: tuple[int, int]) -> tuple[list[str], int, str]:
    """(reward names, number of prompts, error message) of a prompt set file."""
    try:
        items = load_prompt_set(resolve_path(path))
    except Exception as exc:  # noqa: BLE001 - any problem is shown, not raised
        return [], 0, str(exc)
    return list(reward_names(items)), len(items), ""


def form_fields(state, rewards: list[str]) -> dict:
    """TrainConfig fields from the form's widget values (session state)."""
    g = lambda name: state.get(PREFIX + name)  # noqa: E731
    folder = (g("model_folder") or "").strip()
    fields = {
        "model": folder or g("model"),
        "prompt_set": state.get("lf_prompt_path") or DEFAULTS.prompt_set,
        "method": g("method"), "routing": g("routing"), "relevance": g("relevance"),
        "lam": g("lam"), "steps": g("steps"), "group_size": g("group_size"), "prompts_per_step": g("prompts_per_step"),
        "lr": g("lr"), "seed": g("seed"), "max_new_tokens": g("max_new_tokens"), "temperature": g("temperature"),
        "device": g("device"), "run_name": (g("run_name") or "").strip(), "w_max": g("w_max"), "sharpen": g("sharpen"),
        "kl_beta": g("kl_beta"), "clip_range": g("clip_range"), "inner_epochs": g("inner_epochs"),
        "checkpoint_every": g("checkpoint_every"), "max_grad_norm": g("max_grad_norm"),
        "replay_chunk": g("replay_chunk"), "runs_dir": str(runs_dir()),
    }
    eval_set = g("eval_prompt_set")
    if eval_set and eval_set != "none":
        fields["eval_prompt_set"] = eval_set
    weights = {r: float(state.get(f"{WEIGHT_PREFIX}{r}", 1.0)) for r in rewards}
    fields["reward_weights"] = {r: w for r, w in weights.items() if w != 1.0}
    return {k: v for k, v in fields.items() if v is not None}


def submit(rewards: list[str]) -> None:
    """Form callback: validate; start the run when valid, else keep the errors for the fields."""
    fields = form_fields(st.session_state, rewards)
    cfg, errors = launcher.validate(fields)
    if cfg is not None:
        try:
            launched = launcher.start_run(cfg)
        except (OSError, ConfigError, ValueError) as exc:
            errors = {launcher.FORM_ERROR: f"could not start the trainer: {exc}"}
        else:
            st.session_state[LAUNCHED_KEY] = [*st.session_state.get(LAUNCHED_KEY, []), str(launched.path)]
            st.session_state[ui.RUN_KEY] = str(launched.path)
            st.session_state["launch_message"] = f"Started run **{launched.name}** (pid {launched.pid})."
    if "model" in errors and (st.session_state.get(PREFIX + "model_folder") or "").strip():
        errors["model_folder"] = errors.pop("model")  # the folder input is what the user typed
    st.session_state[ERRORS_KEY] = errors


def show_error(field: str, where=st) -> None:
    msg = st.session_state.get(ERRORS_KEY, {}).get(field)
    if msg:
        where.error(msg)


st.title("Launch a training run")
st.caption(f"Runs go to `{runs_dir()}`. Training runs as a separate `mrtpo train` process and keeps going if "
           "the app stops; its output is in the run's `train.log`.")

# The prompt set is chosen outside the form: its rewards decide which weight inputs the form shows.
prompt_files = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "sample_data" / "prompts").glob("*.jsonl"))
pc1, pc2 = st.columns([1, 1])
picked = pc1.selectbox("Prompt set", [*prompt_files, "other file…"],
                       index=prompt_files.index(DEFAULTS.prompt_set) if DEFAULTS.prompt_set in prompt_files else 0)
other = pc2.text_input("Prompt set path (JSONL)", disabled=picked != "other file…", key="lf_prompt_other")
prompt_path = other.strip() if picked == "other file…" else picked
st.session_state["lf_prompt_path"] = prompt_path
rewards, n_prompts, prompt_error = ([], 0, "no file given") if not prompt_path else prompt_set_rewards(
    prompt_path, loaders.file_key(resolve_path(prompt_path)))
if prompt_error:
    st.error(f"Prompt set: {prompt_error}")
else:
    st.caption(f"{n_prompts} prompts · rewards: " + ", ".join(f"`{r}`" for r in rewards))
show_error("prompt_set")

with st.form("launch"):
    st.markdown("**Model**")
    m1, m2 = st.columns([1, 2])
    m1.selectbox("Preset", MODEL_PRESETS, key=PREFIX + "model")
    m2.text_input("Local model folder (a save_pretrained folder; overrides the preset)", key=PREFIX + "model_folder",
                  placeholder="/path/to/model")
    show_error("model", m1)
    show_error("model_folder", m2)

    st.markdown("**Method**")
    c = st.columns(4)
    c[0].selectbox("Method", METHODS, index=METHODS.index(DEFAULTS.method), key=PREFIX + "method")
    c[1].selectbox("Routing source", ROUTINGS, index=ROUTINGS.index(DEFAULTS.routing), key=PREFIX + "routing",
                   help="mrtpo only: replay (contrastive JS), span (verifier spans, an oracle), uniform (= GDPO)")
    c[2].number_input("λ (routing strength)", value=DEFAULTS.lam, step=0.1, key=PREFIX + "lam",
                      help="0 = uniform weights (GDPO), 1 = pure routing")
    c[3].selectbox("Relevance", RELEVANCES, index=RELEVANCES.index(DEFAULTS.relevance), key=PREFIX + "relevance")
    for i, f in enumerate(("method", "routing", "lam", "relevance")):
        show_error(f, c[i])

    st.markdown("**Rollout and optimisation**")
    c = st.columns(4)
    c[0].number_input("Steps", value=DEFAULTS.steps, step=1, key=PREFIX + "steps")
    c[1].number_input("G (responses per prompt)", value=DEFAULTS.group_size, step=1, key=PREFIX + "group_size")
    c[2].number_input("Prompts per step", value=DEFAULTS.prompts_per_step, step=1, key=PREFIX + "prompts_per_step")
    c[3].number_input("Learning rate", value=DEFAULTS.lr, step=1e-5, format="%.1e", key=PREFIX + "lr")
    for i, f in enumerate(("steps", "group_size", "prompts_per_step", "lr")):
        show_error(f, c[i])
    c = st.columns(4)
    c[0].number_input("Seed", value=DEFAULTS.seed, step=1, key=PREFIX + "seed")
    c[1].number_input("Max new tokens", value=DEFAULTS.max_new_tokens, step=8, key=PREFIX + "max_new_tokens")
    c[2].selectbox("Device", DEVICES, index=DEVICES.index(DEFAULTS.device), key=PREFIX + "device")
    c[3].text_input("Run name (empty: automatic)", key=PREFIX + "run_name", max_chars=64)
    for i, f in enumerate(("seed", "max_new_tokens", "device", "run_name")):
        show_error(f, c[i])

    if rewards:
        st.markdown("**Reward weights** (per constraint family of the prompt set)")
        c = st.columns(min(4, len(rewards)))
        for i, r in enumerate(rewards):
            c[i % len(c)].number_input(r, value=1.0, step=0.5, key=f"{WEIGHT_PREFIX}{r}")
        show_error("reward_weights")

    with st.expander("Advanced"):
        c = st.columns(4)
        c[0].number_input("w_max (weight cap)", value=DEFAULTS.w_max, step=0.5, key=PREFIX + "w_max")
        c[1].number_input("Sharpen (exponent on u)", value=DEFAULTS.sharpen, step=0.5, key=PREFIX + "sharpen")
        c[2].number_input("Temperature", value=DEFAULTS.temperature, step=0.1, key=PREFIX + "temperature")
        c[3].number_input("KL β", value=DEFAULTS.kl_beta, step=0.01, key=PREFIX + "kl_beta")
        for i, f in enumerate(("w_max", "sharpen", "temperature", "kl_beta")):
            show_error(f, c[i])
        c = st.columns(4)
        c[0].number_input("Clip range", value=DEFAULTS.clip_range, step=0.05, key=PREFIX + "clip_range")
        c[1].number_input("Inner epochs", value=DEFAULTS.inner_epochs, step=1, key=PREFIX + "inner_epochs")
        c[2].number_input("Checkpoint every (steps)", value=DEFAULTS.checkpoint_every, step=5,
                          key=PREFIX + "checkpoint_every")
        c[3].number_input("Max grad norm (0: off)", value=DEFAULTS.max_grad_norm, step=0.5, key=PREFIX + "max_grad_norm")
        for i, f in enumerate(("clip_range", "inner_epochs", "checkpoint_every", "max_grad_norm")):
            show_error(f, c[i])
        c = st.columns([2, 1, 1])
        c[0].selectbox("Held-out eval prompt set (scored at checkpoints)", ["none", *prompt_files],
                       key=PREFIX + "eval_prompt_set")
        c[1].number_input("Replay chunk (samples per pass)", value=DEFAULTS.replay_chunk, step=4,
                          key=PREFIX + "replay_chunk")
        show_error("eval_prompt_set", c[0])
        show_error("replay_chunk", c[1])
    show_error(launcher.FORM_ERROR)
    st.form_submit_button("Start training", type="primary", on_click=submit, args=(rewards,),
                          disabled=bool(prompt_error))

if st.session_state.get(ERRORS_KEY):
    st.error("Nothing was started: fix the fields marked above.")
elif msg := st.session_state.pop("launch_message", None):
    st.success(msg)


def tracked_runs() -> list[str]:
    """Runs to follow here: those started from this session plus every active run of the runs directory."""
    launcher.adopt_logs(runs_dir())  # runs whose starting app stopped before their folder existed
    paths = list(reversed(st.session_state.get(LAUNCHED_KEY, [])))
    for info in loaders.all_runs():
        if info.state in ACTIVE_STATES and str(info.path) not in paths:
            paths.append(str(info.path))
    return paths


st.subheader("Runs in progress")
tracked = tracked_runs()
active_now = any(launcher.run_state(p).get("state") in ACTIVE_STATES for p in tracked)


@st.fragment(run_every=2.0 if active_now else None)
def progress_panel() -> None:
    states = {p: launcher.run_state(p) for p in tracked}
    if any(s.get("state") in ACTIVE_STATES for s in states.values()) != active_now:
        st.rerun()
    if not states:
        st.caption("No run in progress.")
        return
    for p, s in states.items():
        name = p.rsplit("/", 1)[-1]
        state = s.get("state", "unknown")
        step, total = int(s.get("step") or 0), s.get("total_steps")
        box = st.container(border=True)
        head = box.columns([4, 1])
        head[0].markdown(f"**{name}** · {ui.state_badge(state)} · step {step}" + (f"/{total}" if total else ""))
        if state in ACTIVE_STATES:
            box.progress(min(1.0, step / total) if total else 0.0, text=f"step {step} of {total or '?'}")
            if head[1].button("Stop", key=f"stop_{name}"):
                box.info(launcher.stop_run(p))
        elif state in ("crashed", "failed"):
            box.error(f"The run {state}.")
            box.code(str(s.get("error") or loaders.log_tail(p) or "no error text")[-4000:], language=None)
        elif state == "stopped":
            box.info("Stopped.")
        elif state == "completed":
            box.success("Completed. See Training curves and Token credit.")


progress_panel()
