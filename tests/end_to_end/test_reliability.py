"""Kill and resume (in one process and in two), the run lock, the NaN guard and determinism
of the main job.

The uninterrupted reference run (`reference`, the tiny run's options `helpers.TINY_ARGS`) is
the one every other run here must equal: resumed after kills at each kind of point, and run
as two processes on one machine over loopback (CPU, gloo) with 2 fake CPU devices each, so
the mesh spans 4 devices in 2 processes and the population of 2 folds is padded to 4.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from rl_trader.cli.report import main as report_main
from rl_trader.cli.train import main
from rl_trader.run.checkpoint import FoldCheckpoints
from tests.helpers import TINY_ARGS

ROOT = Path(__file__).resolve().parents[2]
TINY = [*TINY_ARGS, "--data", "synthetic:ar1:1200:2"]
NO_REPORT = ["--no-report"]  # the kill chain's runs: the report is written once, at the end


def cli_env(kill_at=None):
    """A subprocess's environment: the CPU, the session's compilation cache (conftest.py),
    killed at fault point `kill_at` if given."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("RL_TRADER_KILL_AT", None)
    if kill_at:
        env["RL_TRADER_KILL_AT"] = kill_at
    return env


def run_cli(args, kill_at=None):
    """`python -m rl_trader.cli.train ARGS` (`cli_env`)."""
    return subprocess.run([sys.executable, "-m", "rl_trader.cli.train", *args], cwd=ROOT,
                          env=cli_env(kill_at), capture_output=True, text=True, timeout=300)


REFERENCE_THEN_KILLED = """
import os, sys
from rl_trader.cli.train import main
args, ref, killed = sys.argv[1].split(), sys.argv[2], sys.argv[3]
assert main(args + ["--run-dir", ref]) == 0
os.environ["RL_TRADER_KILL_AT"] = "saved:0"  # this process ends here, by SIGKILL
main(args + ["--run-dir", killed])
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run's summary.json bytes; the same run again in the same process,
    killed where its epoch 0's writes are committed ('saved:0', where epoch 1 starts;
    test_devices.py and the two-process test kill there too), in `base / "killed"`."""
    base = tmp_path_factory.mktemp("rel")
    out = subprocess.run([sys.executable, "-c", REFERENCE_THEN_KILLED, " ".join(TINY + NO_REPORT),
                          str(base / "ref"), str(base / "killed")], cwd=ROOT, env=cli_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == -9, out.stderr  # the reference passed, the second run was killed
    return (base / "ref" / "summary.json").read_bytes(), base


def test_resume_with_other_data_is_refused_before_reading_the_state(reference, tmp_path,
                                                                       capsys):
    """The killed run's directory with its data changed (another seed of the synthetic
    market in config.json): --resume exits 2 with one line, before the members are read."""
    _, base = reference
    copy = tmp_path / "other-data"
    shutil.copytree(base / "killed", copy, ignore=shutil.ignore_patterns(".lock"))
    config = json.loads((copy / "config.json").read_text())
    assert config["data"]["path"] == "synthetic:ar1:1200:2"
    config["data"]["path"] = "synthetic:ar1:1200:3"
    (copy / "config.json").write_text(json.dumps(config))
    assert main(["--resume", "--run-dir", str(copy), *NO_REPORT]) == 2
    assert "changed since the run started" in capsys.readouterr().err


def test_sigkill_then_resume_equals_uninterrupted(reference):
    """Killed at each kind of point, one after another, and resumed in a fresh process each
    time (the last resume in the test's own process), the run writes the same summary.json
    bytes as the uninterrupted run (so the same seed also gives the same bytes in any other
    process), removes its resume state and keeps its
    timings apart. The points: 'saved:0' (`reference`), then, resumed, while saving epoch 1,
    then, resumed again, while scoring. Run with --no-report (given again on each resume), it
    writes no report, which rl_trader.cli.report then writes from the finished run.

    Fold checkpoints and the resume state are written in the background side by side, so a
    kill can leave an epoch's resume state on disk without a fold's checkpoint of it: simulated
    after the first kill by deleting fold 0's epoch-0 checkpoint, which the resumed run saves
    again from the resume state (the same ensemble and score, if it is kept)."""
    ref, base = reference
    run_dir = base / "killed"
    ckpts = run_dir / "fold_0" / "checkpoints"
    assert not (run_dir / "summary.json").exists()
    with FoldCheckpoints(ckpts, "", {}, read_only=True) as c:
        lost = c.metadata(0)
    shutil.rmtree(ckpts / "0")
    for kill_at in ("saving:1", "scoring"):
        out = run_cli(["--resume", "--run-dir", str(run_dir), *NO_REPORT], kill_at=kill_at)
        assert out.returncode == -9, (kill_at, out.stderr)
        assert "resuming after epoch" in out.stdout, kill_at
        assert not (run_dir / "summary.json").exists()
        if kill_at == "saving:1":
            assert ("fold 0: the checkpoint of epoch 0 was not on disk; saved again"
                    in out.stdout)
    assert main(["--resume", "--run-dir", str(run_dir), *NO_REPORT]) == 0  # in this process
    assert (run_dir / "summary.json").read_bytes() == ref
    assert not (run_dir / "resume").exists()  # removed once complete
    assert not (run_dir / "report.html").exists()  # --no-report; written afterwards:
    assert report_main([str(run_dir)]) == 0 and (run_dir / "report.html").is_file()
    timings = json.loads((run_dir / "timings.json").read_text())
    assert "seconds_total" in timings  # timings live apart from the summary
    with FoldCheckpoints(ckpts, "", {}, read_only=True) as c:
        if 0 in c.saved_epochs():  # kept (among the best two): the same ensemble and score
            assert c.metadata(0) == lost


def test_resume_refuses_options_and_missing_runs(tmp_path, capsys):
    assert main(["--resume", "--run-dir", str(tmp_path / "none")]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert main(["--resume", "--epochs", "3", "--run-dir", str(tmp_path)]) == 2
    assert "do not pass --epochs" in capsys.readouterr().err


def test_lock_stops_a_second_writer(tmp_path):
    from rl_trader.errors import InputError
    from rl_trader.runtime.rundir import RunLock

    with RunLock(tmp_path):
        with pytest.raises(InputError, match="in use by pid"):
            with RunLock(tmp_path):
                pass
    with RunLock(tmp_path):  # released
        pass


def test_non_finite_training_stops_the_fold_and_keeps_its_last_good_checkpoint(
        tmp_path, monkeypatch, capsys):
    """Poison fold 1's parameters after its first epoch: fold 1 stops naming the fold, the
    epoch and what went non-finite; its epoch-0 checkpoint is kept and scored; exit code 1."""
    from rl_trader.training import population

    class Poisoned(population.Population):
        calls = 0

        def __init__(self, trainer, mesh=None):
            super().__init__(trainer, mesh)
            real = self.epoch

            def epoch(runners, data, hps):
                runners, metrics = real(runners, data, hps)
                Poisoned.calls += 1
                if Poisoned.calls == 2:  # epoch 1: member 1 is fold 1's
                    params = jax.tree.map(lambda x: x.at[1].set(np.nan), runners.learner.params)
                    runners = runners.replace(learner=runners.learner.replace(params=params))
                return runners, metrics

            self.epoch = epoch

    monkeypatch.setattr(population, "Population", Poisoned)
    run_dir = tmp_path / "nan"
    code = main(TINY + ["--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 1
    assert "fold 1 stopped at epoch 1: non-finite" in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] and summary["folds"][1]["best_epoch"] == 0
    assert summary["folds"][0]["best_epoch"] is not None
    assert len(summary["folds"][1]["epochs"]) == 1  # only the good epoch is a trial
    assert np.isfinite(summary["folds"][1]["test_sharpe"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# `python -m rl_trader.cli.train ARGV` with one change to JAX's persistent compilation cache: the
# key of a program hashes the device kinds instead of the topology's fingerprint, which on the
# CPU differs from process to process, so both processes of a run look up the same entries.
# With JAX's jax_share_binary_between_hosts, process 0 alone compiles a multi-process program
# and hands it to process 1 (a process waiting for it is not at a gloo collective), and the
# resumed processes both load what the killed run's process 0 wrote to the session's cache.
SAME_CACHE_KEY = """
import runpy, sys
from jax._src import cache_key
cache_key._hash_accelerator_config = cache_key._hash_devices
sys.argv[0] = "rl_trader.cli.train"
runpy.run_module("rl_trader.cli.train", run_name="__main__", alter_sys=True)
"""


def two_processes(args: list[str], env: dict) -> list[tuple[int, str, str]]:
    """Run `rl_trader.cli.train ARGS` as processes 0 and 1 (`SAME_CACHE_KEY`); (return code,
    stderr, stdout) of each."""
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-c", SAME_CACHE_KEY, *args, "--coordinator",
         f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)], cwd=ROOT,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, err, out) for p, (out, err) in zip(procs, outs, strict=True)]


def test_two_processes_killed_and_resumed_match_one(reference, tmp_path):
    """Fold k's checkpoints are written by its owner, process k; process 0 writes
    summary.json and the report. Killed after its first epoch and resumed by two processes
    with --resume, the run ends with the reference's Sharpes."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    # The session's compilation cache, one key for both processes (`SAME_CACHE_KEY`): without
    # it their keys differ (each process's device topology is hashed) and only process 0
    # writes, so process 0 alone would load its programs while process 1 compiles them;
    # process 0 then waits at the first gloo collective and, past gloo's 30 s rendezvous
    # deadline, fails (seen with process 1 slowed on a busy core). With one key, the killed
    # run's process 0 compiles each program once for both and the resumed run loads them all.
    env2 = {**env, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
            + " --xla_force_host_platform_device_count=2",
            "JAX_SHARE_BINARY_BETWEEN_HOSTS": "true"}
    two = tmp_path / "two"
    killed = two_processes(TINY + ["--run-dir", str(two)], {**env2, "RL_TRADER_KILL_AT": "saved:0"})
    assert [rc for rc, _, _ in killed] == [-9, -9], killed[0][1][-3000:]
    assert not (two / "summary.json").exists()
    for k in range(2):  # epoch 0, saved by the killed run: by fold k's owner, process k
        with FoldCheckpoints(two / f"fold_{k}" / "checkpoints", "", {}, read_only=True) as c:
            assert c.metadata(0)["process"] == k
    resumed = two_processes(["--run-dir", str(two), "--resume"], env2)
    for rc, err, _ in resumed:
        assert rc == 0, err[-3000:]
    assert "resuming after epoch 0 of 0..2" in resumed[0][2]  # not a fresh start
    one = json.loads(reference[0])
    both = json.loads((two / "summary.json").read_text())
    timings = json.loads((two / "timings.json").read_text())
    assert timings["processes"] == 2 and timings["devices"] == 4
    assert [len(f["epochs"]) for f in both["folds"]] == [3, 3]
    np.testing.assert_allclose([f["test_sharpe"] for f in both["folds"]],
                               [f["test_sharpe"] for f in one["folds"]], atol=1e-4)
    np.testing.assert_allclose([f["val_sharpe"] for f in both["folds"]],
                               [f["val_sharpe"] for f in one["folds"]], atol=1e-4)
    for k in range(2):  # the epochs kept (the best two and the latest, 2, saved by the
        # resumed run) were all saved by process k
        ckpts = two / f"fold_{k}" / "checkpoints"
        kept = sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit())
        assert kept[-1] == 2
        with FoldCheckpoints(ckpts, both["fingerprint"], {}) as c:
            assert [c.metadata(e)["process"] for e in kept] == [k] * len(kept)
    assert not (two / "resume").exists()
    assert (two / "report.html").is_file()  # by process 0
