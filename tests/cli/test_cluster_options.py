"""SIGTERM during `orch sweep` is handled as Ctrl-C: what a batch scheduler sends (`scancel`, a time limit, a
deleted pod) must keep the finished trials, not end the process on the spot. And the options that join a
cluster refuse what cannot work, with exit status 2 and no traceback."""

from __future__ import annotations

import os
import signal

import pytest

from orchestrator.app.session import sigterm_as_interrupt


def test_sigterm_becomes_an_interrupt_once_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            pytest.fail("SIGTERM did not interrupt")
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_sigterm_does_not_cut_the_clean_up_short():
    cleaned = False
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                pytest.fail("SIGTERM did not interrupt")
            finally:
                os.kill(os.getpid(), signal.SIGTERM)   # scancel signals every process; the job script forwards it
                cleaned = True
    assert cleaned


@pytest.mark.parametrize("argv, message", [
    (["topology", "--address", "127.0.0.1:6379", "--topology", "x.yaml"], "give one"),
    (["topology", "--min-nodes", "2"], "--min-nodes needs --address"),
    (["sweep", "sweeps/retinanet.yaml", "--min-nodes", "2"], "--min-nodes needs --address"),
    # a free port: nothing listens there, and orch says so at once instead of Ray retrying for minutes
    (["topology", "--address", "127.0.0.1:{port}"], "nothing answers at 127.0.0.1:"),
    # a word where HOST:PORT belongs (a placeholder copied from a comment): Ray's ValueError, named by orch
    (["topology", "--address", "HEAD"], "not an address of a Ray cluster"),
])
def test_cluster_options_refuse_what_cannot_work(capsys, monkeypatch, argv, message):
    from orchestrator.cli import main
    from orchestrator.run.driver.launcher import free_port

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert main([a.format(port=free_port()) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_sweep_given_a_word_for_an_address_names_it_and_leaves_no_results(capsys, monkeypatch, tmp_path):
    from orchestrator.cli import main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    results = tmp_path / "results"
    assert main(["sweep", "sweeps/retinanet.yaml", "--address", "HEAD", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "not an address of a Ray cluster" in err and "HOST:PORT" in err and "Traceback" not in err
    assert not (results / "trials.jsonl").exists()
