"""SIGTERM stops a zonal command as Ctrl-C does (``zonal.cli.common.terminate_as_interrupt``):
a KeyboardInterrupt inside the block, the previous handler back after it, and a command stopped
by SIGTERM mid-run returns the interrupted status with its resume hint."""

from __future__ import annotations

import os
import signal
import time

import pytest

from zonal.cli import main
from zonal.cli.common import EXIT_INTERRUPTED, terminate_as_interrupt
from zonal.experiments import run as experiment_run


def test_sigterm_raises_keyboard_interrupt_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode boundary
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_experiment_stopped_by_sigterm_returns_interrupted_with_its_resume_hint(
    tmp_path, monkeypatch, capsys
):
    def killed(run):  # the run receives SIGTERM while it trains
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(experiment_run, "execute_run", killed)
    before = signal.getsignal(signal.SIGTERM)
    code = main(["experiment", "run", "uci-dgp", "--output-dir", str(tmp_path)])
    assert code == EXIT_INTERRUPTED
    assert (
        "interrupted; resume with: zonal experiment run uci-dgp --resume" in capsys.readouterr().err
    )
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_interrupt_no_command_handles_is_one_line_and_the_interrupted_status(
    monkeypatch, capsys
):
    """Ctrl-C while a command imports its modules (before it handles interrupts itself)."""
    import zonal.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_demo", interrupted)  # the parser is built at each call
    assert main(["demo"]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.strip() == "zonal: interrupted" and "Traceback" not in err
