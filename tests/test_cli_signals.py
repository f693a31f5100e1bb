"""SIGTERM stops a zonal command as Ctrl-C does (``zonal.cli.common.terminate_as_interrupt``):
a KeyboardInterrupt inside the block, the previous handler back after it, and a command killed
with ``kill -TERM`` exits with the interrupted status and its resume hint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from zonal.cli.common import EXIT_INTERRUPTED, terminate_as_interrupt


def test_sigterm_raises_keyboard_interrupt_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode boundary
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_experiment_exits_interrupted_with_its_resume_hint(tmp_path):
    command = [sys.executable, "-m", "zonal.cli", "experiment", "run", "uci-dgp",
               "--protocol", "quick", "--output-dir", str(tmp_path)]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    # wait until the run has started (its folder exists), then stop it as a background job is
    deadline = time.monotonic() + 60
    while not any(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == EXIT_INTERRUPTED, errors
    assert "interrupted; resume with: zonal experiment run uci-dgp --resume" in errors
