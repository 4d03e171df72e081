"""Using a trained run: the checkpoints' inference metadata, `predict` and `backtest` end to end.

One tiny run is trained once for the module; every test reads it and none may change it.
"""

import dataclasses
import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import pytest
from safetensors.numpy import load_file

from rl_trader import env
from rl_trader.agent.heads import make_head
from rl_trader.agent.learner import TrainState
from rl_trader.agent.model_head import assemble
from rl_trader.agent.optimizer import kernel_mask
from rl_trader.agent.policy import greedy_decide
from rl_trader.cli import backtest as backtest_cli
from rl_trader.cli import predict as predict_cli
from rl_trader.data.features import fit_normaliser
from rl_trader.data.fold_data import bar_context, fold_normaliser, observe
from rl_trader.data.prior import vol_target_positions
from rl_trader.data.synthetic import from_spec
from rl_trader.errors import InputError
from rl_trader.run import experiment
from rl_trader.run.checkpoint import (
    HOLDS_ACTING,
    FoldCheckpoints,
    fingerprint,
    flat_params,
    safetensors_metadata,
)
from rl_trader.run.inference import learner_template, load_policy, market_data, restore_acting
from rl_trader.run.prepare import prepare
from tests.evaluation.test_record import FOLD_KEYS
from tests.helpers import tiny_config


def write_csv(bars, path, rows=slice(None), dates=None, drop=()):
    """Bars (a slice of them) as a CSV file, as a user would save them with pandas."""
    frame = pd.DataFrame({"Date": pd.to_datetime(bars.dates[rows] if dates is None else dates),
                          "Open": bars.open[rows], "High": bars.high[rows],
                          "Low": bars.low[rows], "Close": bars.close[rows],
                          "Volume": bars.volume[rows]})
    frame.drop(columns=list(drop)).to_csv(path, index=False)
    return str(path)


def tree_digest(root):
    """sha256 of every file under `root`, by relative path (directories included as names)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("inference")
    prep = prepare(tiny_config())  # the default's prior (vol_target) and view (trusted)
    run_dir = root / "run"
    experiment.run_experiment(prep, run_dir, log=lambda _: None)
    return prep, run_dir, write_csv(prep.bars, root / "bars.csv")


def run_cli(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err.strip()


def test_checkpoints_and_export_carry_the_train_fit_normaliser(trained):
    prep, run_dir, _ = trained
    for fold in prep.folds:
        with FoldCheckpoints(run_dir / f"fold_{fold.index}" / "checkpoints", "", {},
                             read_only=True) as ckpt:
            meta = ckpt.metadata()
        info = meta["inference"]
        norm = fit_normaliser(prep.features.values, *fold.train)
        np.testing.assert_array_equal(np.float32(info["normaliser"]["mean"]), norm.mean)
        np.testing.assert_array_equal(np.float32(info["normaliser"]["std"]), norm.std)
        assert info["aux_scale"] == fold_normaliser(prep.features.values, prep.bars.close,
                                                    fold)[1]
        assert info["feature_names"] == list(prep.features.names)
        assert (info["lookback"], info["first_valid"]) == (prep.cfg.features.lookback,
                                                           prep.features.first_valid)
        assert info["periods_per_year"] == prep.periods_per_year
        path = run_dir / f"fold_{fold.index}" / "best_params.safetensors"
        header = safetensors_metadata(path)
        assert header == meta
        policy = load_policy(run_dir, fold.index)
        tensors = load_file(str(path))
        assert {k: v.shape for k, v in tensors.items()} == {
            k: v.shape for k, v in flat_params(policy.params).items()}


def test_predict_matches_the_restored_ensemble_on_the_last_bar(trained, capsys):
    prep, run_dir, csv = trained
    code, out, err = run_cli(predict_cli.main, [str(run_dir), csv, "--json"], capsys)
    assert code == 0, err
    pred = json.loads(out)
    fold = prep.folds[-1]
    assert pred["fold"] == fold.index and pred["last_bar"] == len(prep.bars) - 1
    # independently: the fold's data as training built it, the learner the run's way
    cfg = prep.cfg
    summary = json.loads((run_dir / "summary.json").read_text())
    template = learner_template(cfg, len(prep.market_names), cfg.train.seeds).params
    with FoldCheckpoints(run_dir / f"fold_{fold.index}" / "checkpoints",
                         summary["fingerprint"], {}, read_only=True) as ckpt:
        assert ckpt.metadata()["holds"] == HOLDS_ACTING  # the acting params only
        params = ckpt.restore(template)
    data = prep.fold_data(len(prep.folds) - 1)  # with the tree forecast's column, if any
    state = env.reset(len(prep.bars) - 1, len(prep.bars))
    port = env.portfolio_features(state, data.prices)
    target, aux = greedy_decide(params, data, cfg)(None, state, port)
    w_m = aux.market_weights
    assert pred["target"]["fraction"] == pytest.approx(float(target), abs=1e-6)
    out = jax.vmap(make_head(cfg).network.apply, in_axes=(0, None))(
        params, observe(data, state.t, port, cfg.features))
    n = out.aux.shape[0]
    q = assemble(out, jnp.zeros(n), jax.tree.map(lambda x: jnp.full(n, x),
                                               bar_context(data, state.t, cfg.env)), cfg.env,
                 cfg.agent.reward_scale)  # flat: the held position is 0
    scale = float(data.return_scale[state.t])
    for s, member in enumerate(pred["members"]):
        np.testing.assert_allclose(list(member["q_position"].values()), q[s], atol=1e-4)
        assert member["aux_next_log_return"] == pytest.approx(float(out.aux[s]) * scale,
                                                              rel=1e-5)
        assert member["next_return_second_moment"] == pytest.approx(
            float(out.second_moment[s]) * scale**2, rel=1e-5)
    np.testing.assert_allclose(list(pred["market_vsn_weights"].values()), w_m, atol=1e-6)
    assert pred["portfolio_features"]["position"] == 0.0
    # a held position enters the portfolio features; the table form prints the target
    code, out, err = run_cli(predict_cli.main, [str(run_dir), csv, "--position", "-0.5"],
                             capsys)
    assert code == 0, err
    assert "target for the next bar" in out
    held = json.loads(run_cli(predict_cli.main, [str(run_dir), csv, "--json", "--position",
                                                 "-0.5", "--fold", "0"], capsys)[1])
    # the option names `train` taught: the same prediction
    named = run_cli(predict_cli.main, ["--run-dir", str(run_dir), "--data", csv, "--json",
                                       "--position", "-0.5", "--fold", "0"], capsys)
    assert named[0] == 0 and json.loads(named[1]) == held
    assert held["fold"] == 0
    assert held["portfolio_features"]["position"] == pytest.approx(-0.5, abs=1e-6)
    assert held["portfolio_features"]["time_in_position"] > 0


@pytest.mark.parametrize("case, needle", [
    ("missing_column", "missing required column(s) Volume"),
    ("too_short", "needs at least"),
    ("weekly", "bars a year"),
    ("fold", "option --fold 7"),
    ("position", "option --position"),
])
def test_unfit_input_is_refused_in_one_line(trained, tmp_path, capsys, case, needle):
    prep, run_dir, csv = trained
    bars, argv = prep.bars, []
    need = prep.features.first_valid + prep.cfg.features.lookback
    if case == "missing_column":
        csv = write_csv(bars, tmp_path / "b.csv", drop=["Volume"])
    elif case == "too_short":
        csv = write_csv(bars, tmp_path / "b.csv", rows=slice(-(need - 1), None))
    elif case == "weekly":
        weeks = np.datetime64("2000-01-07") + 7 * np.arange(len(bars)).astype("timedelta64[D]")
        csv = write_csv(bars, tmp_path / "b.csv", dates=weeks)
    elif case == "fold":
        argv = ["--fold", "7"]
    else:
        argv = ["--position", "3"]
    code, _, err = run_cli(predict_cli.main, [str(run_dir), csv, *argv], capsys)
    assert code == 2
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_a_mismatching_architecture_is_refused(trained):
    prep, run_dir, _ = trained
    cfg = prep.cfg
    wider = dataclasses.replace(cfg, net=dataclasses.replace(cfg.net, hidden=cfg.net.hidden + 1))
    with pytest.raises(InputError, match="architecture differs"):
        restore_acting(run_dir / "fold_1" / "checkpoints", wider, len(prep.features.names),
                       cfg.train.seeds)


def test_an_older_checkpoint_holding_the_whole_learner_state_still_reads(tmp_path):
    """Epochs saved before fold checkpoints held the acting params alone (before 2026-11-30)
    hold the whole learner state, with the optimiser state of that time (optax's chain, leaf
    by leaf, not the raveled one a CPU makes today): `restore_acting` reads their acting params
    alone."""
    cfg = tiny_config()
    template = learner_template(cfg, 4, 2)
    rng = np.random.default_rng(0)
    acting = jax.tree.map(lambda x: rng.normal(size=x.shape).astype(x.dtype), template.params)
    then = optax.chain(optax.clip_by_global_norm(10.0),
                       optax.adamw(1e-4, weight_decay=0.01, mask=kernel_mask))
    learner = TrainState(params=acting, target_params=jax.tree.map(lambda x: -x, acting),
                         opt_state=jax.vmap(then.init)(acting), step=np.zeros(2, np.int32))
    assert jax.tree.structure(learner.opt_state) != jax.tree.structure(template.opt_state)
    fp = fingerprint(acting, cfg.net, len(cfg.env.magnitudes))
    with FoldCheckpoints(tmp_path / "ckpt", fp, {"seeds": 2}) as ckpt:
        ckpt.save(0, learner, 0.5)  # no "holds": the older layout
    got = restore_acting(tmp_path / "ckpt", cfg, 4, 2)
    jax.tree.map(np.testing.assert_array_equal, got, acting)


# The keys of a backtest's summary.json, in the order its bytes follow.
BACKTEST_KEYS = ["backtest", "run_dir", "fold", "first_date", "last_date",
                 "bars_seen_in_training", "fold_dates", "folds", "stitched_test_sharpe",
                 "stitched_buy_and_hold_test_sharpe", "geo_mean_test_sharpe", "stitched",
                 "headline", "config", "data_sha256", "data_source", "n_bars",
                 "periods_per_year", "feature_names", "fingerprint"]


def test_backtest_on_later_bars_writes_a_summary_and_leaves_the_run_alone(trained, tmp_path,
                                                                         capsys):
    prep, run_dir, _ = trained
    before = tree_digest(run_dir)
    later = from_spec("synthetic:ar1:1500:1").bars  # the run's market, 300 bars longer
    csv = write_csv(later, tmp_path / "later.csv", rows=slice(900, None))
    out = tmp_path / "bt"
    code, _, err = run_cli(backtest_cli.main, [str(run_dir), csv, "--out", str(out)], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    start = prep.features.first_valid + prep.cfg.features.lookback
    (entry,) = summary["folds"]
    assert list(summary) == BACKTEST_KEYS  # the run record's order (evaluation.record)
    assert list(entry) == [k for k in FOLD_KEYS if k in entry]
    assert (summary["fold"], entry["test_start"], entry["test_end"]) == (1, start, 600)
    assert set(summary["stitched"]) == {"agent", "buy_and_hold", "flat", "momentum_20",
                                        "random"}
    assert all(np.isfinite(m["sharpe"]) for m in summary["stitched"].values())
    assert summary["stitched"]["flat"]["sharpe"] == 0.0
    assert 0.0 <= summary["headline"]["psr"] <= 1.0 and summary["headline"]["dsr"] is None
    assert summary["headline"]["n_test_bars"] == 600 - start
    spa = summary["headline"]["spa"]  # against the baselines the backtest ran
    assert set(spa["agent_beats"]) == set(summary["stitched"]) - {"agent"}
    assert spa["agent_beats"]["flat"] <= spa["p_agent_beats_all"] <= 1.0
    with np.load(out / entry["returns_file"]) as z, \
            np.load(run_dir / "fold_1" / "test_returns.npz") as ref:
        # a backtest has no fitted baselines (no train block in the new file) and no oracle
        assert set(z.files) == set(ref.files) - {"ridge", "gbm", "vol_target", "oracle"}
        assert all(z[name].shape[-1] == 600 - start for name in z.files)
        np.testing.assert_array_equal(z["bars"], np.arange(start, 600))
        assert z["dates"][0] == later.dates[900 + start].astype(np.int64)
    assert (out / "report.html").is_file()
    # the option names `train` taught: the same backtest
    named = tmp_path / "bt_named"
    code, _, err = run_cli(backtest_cli.main, ["--data", csv, "--run-dir", str(run_dir),
                                               "--out", str(named)], capsys)
    assert code == 0, err
    assert json.loads((named / "summary.json").read_text())["stitched"] == summary["stitched"]
    # refusals: an output inside the run, an output in use
    for target in (run_dir / "bt", out):
        code, _, err = run_cli(backtest_cli.main, [str(run_dir), csv, "--out", str(target)],
                               capsys)
        assert code == 2 and "option --out" in err and "\n" not in err
    assert tree_digest(run_dir) == before


def test_a_checkpoint_without_inference_metadata_is_refused(tmp_path):
    (tmp_path / "folds.json").write_text(json.dumps({"folds": [{"index": 0}]}))
    with FoldCheckpoints(tmp_path / "fold_0" / "checkpoints", "fp", {"config": {}}) as ckpt:
        ckpt.save(0, {"w": np.zeros(2, np.float32)}, 0.1)
    with pytest.raises(InputError, match="no inference metadata"):
        load_policy(tmp_path)
    with pytest.raises(InputError, match="option --fold 3"):
        load_policy(tmp_path, 3)


def test_a_run_saved_with_a_removed_option_is_refused_in_one_line(tmp_path):
    """`--sizing forecast` left the code (issue 27): such a run cannot act on new bars, and
    says so in one line; a saved config holding the removed fields' old defaults still loads."""
    saved = tiny_config().to_dict()
    saved["agent"]["sizing"] = "forecast"
    (tmp_path / "folds.json").write_text(json.dumps({"folds": [{"index": 0}]}))
    with FoldCheckpoints(tmp_path / "fold_0" / "checkpoints", "fp",
                         {"config": saved, "inference": {}}) as ckpt:
        ckpt.save(0, {"w": np.zeros(2, np.float32)}, 0.1)
    with pytest.raises(InputError, match=r"agent.sizing='forecast', an option removed") as err:
        load_policy(tmp_path)
    assert "\n" not in str(err.value) and "study 12" in str(err.value)


def test_a_run_with_the_prior_acts_and_reports_prior_plus_residual(trained, tmp_path, capsys):
    """The default `--prior vol_target --view trusted`: scoring, `predict` and `backtest` all
    act around the prior min(1, σ*/σ̂) of the fold's own σ* and with the fold's trust in its
    forecast (both saved with the checkpoint), record the prior per decision
    (`prior_position`) and split the target into prior + residual."""
    prep, run_dir, csv = trained
    assert (prep.cfg.env.prior, prep.cfg.env.view) == ("vol_target", "trusted")
    summary = json.loads((run_dir / "summary.json").read_text())
    for k, entry in enumerate(summary["folds"]):  # the trust the fold acted with, fit on train
        assert entry["trust"] == prep.trusts[k].to_dict()
        t, w = entry["trust"]["t"], entry["trust"]["w"]
        assert w == pytest.approx(max(0.0, 1 - 1 / t**2) if t > 1 else 0.0)
        np.testing.assert_array_equal(np.asarray(prep.fold_data(k).trust), np.float32(w))
    policy = load_policy(run_dir)
    assert policy.info["trust"] == summary["folds"][-1]["trust"]
    later = market_data(policy, prep.bars)
    np.testing.assert_array_equal(np.asarray(later.trust), np.float32(policy.info["trust"]["w"]))
    fold = prep.folds[-1]
    vt, star = vol_target_positions(prep.bars.close, *fold.train)
    with np.load(run_dir / summary["folds"][-1]["returns_file"]) as z:
        decided = z["bars"] - 1  # each bar's position is decided at the previous close
        np.testing.assert_allclose(z["prior_position"], vt[decided], rtol=1e-6)
        residual = z["agent_position"] - z["prior_position"]
    figures = summary["folds"][-1]["prior"]
    assert figures["prior"] == "vol_target"
    assert figures["mean_abs_residual"] == pytest.approx(np.mean(np.abs(residual)), rel=1e-6)
    code, out, err = run_cli(predict_cli.main, [str(run_dir), csv, "--json"], capsys)
    assert code == 0, err
    pred = json.loads(out)
    assert pred["prior"]["kind"] == "vol_target"
    assert pred["prior"]["fraction"] == pytest.approx(vt[-1], rel=1e-6)
    assert pred["target"]["fraction"] == pytest.approx(
        pred["prior"]["fraction"] + pred["prior"]["residual"])
    assert load_policy(run_dir).sigma_star == pytest.approx(star)
    code, _, err = run_cli(backtest_cli.main, [str(run_dir), csv, "--out",
                                               str(tmp_path / "bt")], capsys)
    assert code == 0, err
    bt = json.loads((tmp_path / "bt" / "summary.json").read_text())
    assert bt["folds"][0]["prior"]["prior"] == "vol_target"
    with np.load(tmp_path / "bt" / bt["folds"][0]["returns_file"]) as z:
        np.testing.assert_allclose(z["prior_position"], vt[z["bars"] - 1], rtol=1e-6)
