"""The first programs compiled ahead (`run.ahead`): what its wait reports, and that an error
in its thread costs only the head start. That the run's initialisation, first epoch and first
validation then compile nothing is tested on the smoke run (tests/cli/test_train.py)."""

from rl_trader.run import ahead


def test_wait_reports_the_seconds_the_thread_took(monkeypatch):
    monkeypatch.setattr(ahead, "_compile_ahead", lambda prep, devices: 12.34)
    assert ahead.CompileAhead(None, None).wait() == (
        "the initialisation, training and validation programs: built, traced and compiled in "
        "12.3s beside the tree fits")


def test_an_error_in_the_thread_is_reported_and_the_run_goes_on(monkeypatch):
    def fail(prep, devices):
        raise MemoryError("out of device memory")

    monkeypatch.setattr(ahead, "_compile_ahead", fail)
    assert ahead.CompileAhead(None, None).wait() == (
        "the programs could not all be compiled ahead (MemoryError: out of device memory); "
        "the run compiles what is missing")
