"""Launch: a form for a training run. Valid values start `mrtpo train` as a separate process; each
problem is shown next to its field and nothing starts. Active runs (also those started before the
app restarted) show progress and a Stop button; a crashed run shows its error and log tail."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from core import resources
from core.config import MODEL_PRESETS, ConfigError, TrainConfig
from core.paths import PROMPTS_DIR, REPO_ROOT, resolve_path, runs_dir
from core.run.store import ACTIVE_STATES
from core.tasks import load_prompt_set, reward_names
from mrtpo_viz import form, launcher, loaders, ui

ERRORS_KEY = "launch_errors"
MEMORY_KEY = "launch_form_values"  # the values of the last launch, restored when the page is opened again
LAUNCHED_KEY = ui.LAUNCHED_KEY
WEIGHT_PREFIX = "lfw_"  # reward weight inputs: lfw_<reward name> (apart from the lf_<field> widgets)
SCALE_PREFIX = "lfs_"  # reward scale inputs (scale-matched GDPO, issue 42): lfs_<reward name>
DEFAULTS = TrainConfig()
FIELDS = form.form_fields()  # one widget per TrainConfig field, from its type, default and doc line
COLUMNS = 4


@st.cache_data(show_spinner=False)
def prompt_set_rewards(path: str, key: tuple[int, int]) -> tuple[list[str], int, str]:
    """(reward names, number of prompts, error message) of a prompt set file."""
    try:
        items = load_prompt_set(resolve_path(path))
    except Exception as exc:  # noqa: BLE001 - any problem is shown, not raised
        return [], 0, str(exc)
    return list(reward_names(items)), len(items), ""


def form_values(state, rewards: list[str]) -> dict:
    """TrainConfig fields from the form's widget values (session state)."""
    values = form.values_from_state(state, FIELDS)
    folder = (state.get(form.widget_key("model_folder")) or "").strip()
    values["model"] = folder or state.get(form.widget_key("model"))
    values["prompt_set"] = state.get("lf_prompt_path") or DEFAULTS.prompt_set
    values["runs_dir"] = str(runs_dir())
    eval_set = state.get(form.widget_key("eval_prompt_set"))
    if eval_set and eval_set != "none":
        values["eval_prompt_set"] = eval_set
    weights = {r: float(state.get(f"{WEIGHT_PREFIX}{r}", 1.0)) for r in rewards}
    values["reward_weights"] = {r: w for r, w in weights.items() if w != 1.0}
    scales = {r: float(state.get(f"{SCALE_PREFIX}{r}", 1.0)) for r in rewards}
    values["reward_scales"] = {r: c for r, c in scales.items() if c != 1.0}
    return {k: v for k, v in values.items() if v is not None}


def remember_form() -> None:
    """Keep the form's values for the next launch (Streamlit forgets a widget's state when its page is left);
    the run name is not kept, since it is now taken."""
    st.session_state[MEMORY_KEY] = {k: v for k, v in st.session_state.items()
                                    if isinstance(k, str) and k.startswith((form.PREFIX, WEIGHT_PREFIX, SCALE_PREFIX))
                                    and k != form.widget_key("run_name")}


def submit(rewards: list[str]) -> None:
    """Form callback: validate; start the run when valid, else keep the errors for the fields."""
    values = form_values(st.session_state, rewards)
    cfg, errors = launcher.validate(values)
    if cfg is not None:
        try:
            launched = launcher.start_run(cfg)
        except (OSError, ConfigError, ValueError) as exc:
            errors = {launcher.FORM_ERROR: f"could not start the trainer: {exc}"}
        else:
            st.session_state[LAUNCHED_KEY] = [*st.session_state.get(LAUNCHED_KEY, []), str(launched.path)]
            ui.set_run(launched.path)  # every inspect page now shows the new run
            remember_form()
            st.session_state["launch_message"] = f"Started run **{launched.name}** (pid {launched.pid})."
    if "model" in errors and (st.session_state.get(form.widget_key("model_folder")) or "").strip():
        errors["model_folder"] = errors.pop("model")  # the folder input is what the user typed
    st.session_state[ERRORS_KEY] = errors


def show_error(field: str, where=st) -> None:
    msg = st.session_state.get(ERRORS_KEY, {}).get(field)
    if msg:
        where.error(msg)


def draw_field(field: form.FormField, where) -> None:
    """One widget for a TrainConfig field, keyed lf_<field>, its doc line as help; its error under it."""
    kw = {"key": field.key, "help": field.help}
    if field.key not in st.session_state:
        kw["value" if field.kind != "select" else "index"] = (
            field.options.index(field.default) if field.kind == "select" else field.default)
    if field.kind == "select":
        where.selectbox(field.label, field.options, **kw)
    elif field.kind in ("int", "float"):
        if field.kind == "float" and "value" in kw:
            kw["value"] = float(field.default)
        where.number_input(field.label, step=field.step or (1 if field.kind == "int" else 0.1),
                           format=field.format, **kw)
    else:
        where.text_input(field.label, max_chars=field.max_chars, **kw)
    show_error(field.name, where)


def draw_sections(groups: dict[str, list[form.FormField]]) -> None:
    for section, fields in groups.items():
        st.markdown(f"**{section.capitalize()}**")
        for row in range(0, len(fields), COLUMNS):
            cols = st.columns(COLUMNS)
            for col, field in zip(cols, fields[row:row + COLUMNS], strict=False):
                draw_field(field, col)


for _key, _value in st.session_state.get(MEMORY_KEY, {}).items():
    st.session_state.setdefault(_key, _value)

st.title("Launch a training run")
st.caption(f"Runs go to `{runs_dir()}`. Training runs as a separate `mrtpo train` process and keeps going if "
           "the app stops; its output is in the run's `train.log`.")

# The prompt set is chosen outside the form: its rewards decide which weight inputs the form shows.
prompt_files = sorted(str(p.relative_to(REPO_ROOT)) for p in PROMPTS_DIR.glob("*.jsonl"))
pc1, pc2 = st.columns([1, 1])
picked = pc1.selectbox("Prompt set", [*prompt_files, "other file…"],
                       index=prompt_files.index(DEFAULTS.prompt_set) if DEFAULTS.prompt_set in prompt_files else 0)
other = pc2.text_input("Prompt set path (JSONL)", disabled=picked != "other file…", key="lf_prompt_other")
prompt_path = other.strip() if picked == "other file…" else picked
st.session_state["lf_prompt_path"] = prompt_path
rewards, n_prompts, prompt_error = ([], 0, "no file given") if not prompt_path else prompt_set_rewards(
    prompt_path, loaders.file_key(resolve_path(prompt_path)))
if prompt_error:
    st.error(f"Prompt set: {ui.plain(prompt_error)}")  # the error quotes the file's own text (family names)
else:
    st.caption(f"{n_prompts} prompts · rewards: " + ", ".join(f"`{r}`" for r in rewards))
show_error("prompt_set")

# A bordered box, not an st.form: a form sends its values only on submit, so the disk estimate under it would be
# for the last start's values; plain widgets rerun the page on each change and the estimate follows the form.
with st.container(border=True):
    st.markdown("**Model**")
    m1, m2 = st.columns([1, 2])
    m1.selectbox("Preset", list(MODEL_PRESETS), key=form.widget_key("model"),
                 help="; ".join(f"{name}: {about}" for name, about in MODEL_PRESETS.items()))
    m2.text_input("Local model folder (a save_pretrained folder; overrides the preset)",
                  key=form.widget_key("model_folder"), placeholder="/path/to/model")
    show_error("model", m1)
    show_error("model_folder", m2)

    draw_sections(form.sections(FIELDS, advanced=False))

    if rewards:
        st.markdown("**Reward weights** (per constraint family of the prompt set)")
        c = st.columns(min(COLUMNS, len(rewards)))
        for i, r in enumerate(rewards):
            key = f"{WEIGHT_PREFIX}{r}"
            c[i % len(c)].number_input(r, step=0.5, key=key, **({} if key in st.session_state else {"value": 1.0}))
        show_error("reward_weights")

    with st.expander("Advanced"):
        draw_sections(form.sections(FIELDS, advanced=True))
        e1, _ = st.columns([2, 2])
        e1.selectbox("Held-out eval prompt set (scored at checkpoints)", ["none", *prompt_files],
                     key=form.widget_key("eval_prompt_set"))
        show_error("eval_prompt_set", e1)
        if rewards:
            st.markdown("**Reward scales** (GDPO only, the scale-matched control: reward k's group advantage times "
                        "c_k; 1 leaves it as it is)")
            c = st.columns(min(COLUMNS, len(rewards)))
            for i, r in enumerate(rewards):
                key = f"{SCALE_PREFIX}{r}"
                c[i % len(c)].number_input(r, min_value=0.0, step=0.05, key=key,
                                           **({} if key in st.session_state else {"value": 1.0}))
            show_error("reward_scales")
    show_error(launcher.FORM_ERROR)
    st.button("Start training", type="primary", on_click=submit, args=(rewards,), disabled=bool(prompt_error))


def disk_caption(rewards: list[str]) -> str:
    """The disk the form's settings will take (`core.resources.disk_line`), "" while they are not valid."""
    try:
        cfg = TrainConfig(**form_values(st.session_state, rewards))
    except (ConfigError, ValueError, TypeError):
        return ""
    return resources.disk_line(cfg, len(rewards)) if rewards else ""


if caption := disk_caption(rewards):
    st.caption(caption[:1].upper() + caption[1:] + " (for the values in the form now)")
if st.session_state.get(ERRORS_KEY):
    st.error("Nothing was started: fix the fields marked above.")
elif msg := st.session_state.pop("launch_message", None):
    st.success(msg)


def active_runs() -> list[str]:
    """Runs in progress: this session's launches still loading or training, and every active run of the runs
    directory (also those started before the app restarted)."""
    launcher.adopt_logs(runs_dir())  # runs whose starting app stopped before their folder existed
    return [str(r.path) for r in ui.session_runs() if r.state in ACTIVE_STATES]


STOPPED_KEY = "launch_stopped_here"  # runs this session stopped or killed (also those another session started)


def ended_here() -> list[str]:
    """Runs this session started, stopped or killed that are no longer active (newest first): a Stop or Kill from
    another session than the one that started the run is confirmed here too."""
    mine = [*st.session_state.get(LAUNCHED_KEY, []), *st.session_state.get(STOPPED_KEY, [])]
    return [p for p in reversed(list(dict.fromkeys(mine))) if launcher.run_state(p).get("state") not in ACTIVE_STATES]


def stopped_here(path: str) -> None:
    """Remember that this session stopped (or killed) the run at `path`."""
    st.session_state[STOPPED_KEY] = [*st.session_state.get(STOPPED_KEY, []), path]


st.subheader("Runs in progress")
tracked = active_runs()


@st.fragment(run_every=ui.REFRESH_S if tracked else None)
def progress_panel() -> None:
    states = {p: launcher.run_state(p) for p in tracked}
    if any(s.get("state") not in ACTIVE_STATES for s in states.values()) or set(active_runs()) != set(tracked):
        st.rerun()  # a run ended or another one started: redraw the lists
    if not states:
        st.caption("No run in progress.")
        return
    for p, s in states.items():
        name = Path(p).name
        state = s.get("state", "unknown")
        step, total = int(s.get("step") or 0), s.get("total_steps")
        box = st.container(border=True)
        head = box.columns([4, 1])
        head[0].markdown(f"**{name}** · {ui.state_badge(state)} · step {step}" + (f"/{total}" if total else ""))
        box.progress(min(1.0, step / total) if total else 0.0, text=f"step {step} of {total or '?'}")
        if not step:
            with box:
                ui.show_startup(p, s)
        stop = launcher.stopping(p)
        if stop is None:
            if head[1].button("Stop", key=f"stop_{name}"):
                stopped_here(p)
                box.info(launcher.stop_run(p))
        else:
            left = max(0.0, stop.deadline - time.monotonic())
            box.warning(f"Stopping: SIGTERM sent {time.monotonic() - stop.sent_at:.0f} s ago; the trainer stops "
                        f"after its current step, or is killed (SIGKILL) in {left:.0f} s, keeping its completed "
                        "steps.")
            if head[1].button("Kill now", key=f"kill_{name}"):
                stopped_here(p)
                box.info(launcher.kill_now(p))


progress_panel()

ended = ended_here()
if ended:
    st.subheader("Started or stopped here, now ended")
    for p in ended:
        s = launcher.run_state(p)
        state = s.get("state", "unknown")
        box = st.container(border=True)
        box.markdown(f"**{Path(p).name}** · {ui.state_badge(state)} · step {int(s.get('step') or 0)}")
        if state in ("crashed", "failed"):
            box.error(f"The run {ui.plain(state)}:")
            box.code(str(s.get("error") or "no error text")[-4000:], language=None)
            tail = launcher.launch_log(p, 15)
            if tail:
                box.caption("Last lines of its log:")
                box.code(tail, language=None)
        elif state == "stopped" and s.get("stopped_by"):
            box.warning("Killed (SIGKILL): the trainer did not stop on SIGTERM within its "
                        "grace period. Its completed steps are kept (resume it on the Runs page).")
        elif state == "stopped":
            box.info("Stopped; its completed steps are kept (resume it on the Runs page).")
        elif state == "completed":
            box.success("Completed. See Training curves and Token credit.")
