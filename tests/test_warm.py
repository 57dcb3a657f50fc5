"""mrtpo_viz.ui.warm without a server: when a warm session counts as done, and which run the warm sessions open the
pages on (the warm sessions on a real server are in tests/test_browser.py, the quiet wait in tests/test_serve.py)."""

from __future__ import annotations

from pathlib import Path

from core.run.store import RunInfo
from mrtpo_viz.ui.warm import warm_key, warm_target


def info(name: str, state: str = "completed", step: int = 3, source: str = "runs") -> RunInfo:
    return RunInfo(name=name, path=Path("/runs") / name, source=source, state=state, step=step, total_steps=3,
                   method="mrtpo", model="m", updated_at="2026-12-05T00:00:00+00:00", warnings=[])


def test_a_warm_session_is_done_when_its_script_finished_not_when_it_stopped_for_a_rerun():
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from mrtpo_viz.ui.warm import _Client

    def finished(status) -> ForwardMsg:
        msg = ForwardMsg()
        msg.script_finished = status
        return msg

    client = _Client()
    client.write_forward_msg(finished(ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN))
    client.write_forward_msg(finished(ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY))
    assert not client.finished.is_set()
    shown = ForwardMsg()
    shown.delta.new_element.exception.message = "boom"
    client.write_forward_msg(shown)
    client.write_forward_msg(finished(ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY))
    assert client.finished.is_set() and client.errors == ["boom"] and client.client_context is None


def test_the_warm_opens_the_chosen_run_by_name_and_never_a_training_one():
    done, other, live = info("done"), info("other", source="sample"), info("live", state="running", step=1)
    assert warm_target([done, other], None) == ("", [done, other])  # each page's default: every run decides it
    assert warm_target([live, done, other], None) is None  # the pages would open on the training run
    assert warm_target([live, done, other], done) == ("run=done", [done])  # a training run elsewhere does not matter
    assert warm_target([done, other], other) == ("run=sample%2Fother", [other])
    assert warm_target([live, done], live) is None
    assert warm_target([], None) is None
    # a new step, or another state, of a run that decides what a page draws is warmed again
    assert warm_key("js", "", [done]) != warm_key("js", "", [info("done", step=4)])
    assert warm_key("js", "", [done]) != warm_key("debugger", "", [done])
