"""A finished tiny gate run, shared by the studies' scripts' tests."""

import pytest

from experiments.convergence import main as gate_main
from tests.helpers import TINY_ARGS


@pytest.fixture(scope="session")
def gate_run(tmp_path_factory):
    """One tiny gate run of a planted market (`MARKET-run0`, as the gate names it), the agent
    acting in every fold (`--rival off`, the runs the studies read). Read-only: a test that
    changes it works on a copy."""
    parent = tmp_path_factory.mktemp("rival") / "runs"
    gate_main([*TINY_ARGS, "--bars", "1200", "--runs", "1", "--no-report", "--markets",
               "ar1_strong", "--rival", "off", "--run-dir", str(parent)])
    return parent / "ar1_strong-run0"
