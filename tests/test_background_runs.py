"""`testing.runs.Background`, the reference run that the kill and SIGTERM tests start beside
the run they stop: its logs, its result, and `stop` (what the `background` fixture calls at
a test's end)."""

from __future__ import annotations

import signal
import sys
import time

from keras_transformer.testing.runs import Background


def test_result_has_the_runs_status_and_both_logs(tmp_path):
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    done = Background([sys.executable, "-c", code], tmp_path / "log").result(timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert (tmp_path / "log.stderr").read_text() == "err\n"


def test_stop_kills_a_run_still_going_and_leaves_an_ended_one(tmp_path):
    sleeper = Background([sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "a")
    start = time.monotonic()
    sleeper.stop()
    assert sleeper.process.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 30
    ended = Background([sys.executable, "-c", "pass"], tmp_path / "b")
    assert ended.result(timeout=60).returncode == 0
    ended.stop()  # nothing to kill
    assert ended.process.returncode == 0
