"""The report's tables: which folds of an older run acted as their rival (`--rival`, before
study 40), each fold's trust in its forecast."""

from rl_trader.evaluation.record import FoldEntry, RunSummary
from rl_trader.report.tables import acted, fold_table, headline, rival_line, trust_line


def test_folds_of_an_older_run_that_acted_as_their_rival_are_named():
    folds = (FoldEntry(fold=0, best_epoch=2, acts_as="agent", test_sharpe=0.5),
             FoldEntry(fold=1, best_epoch=4, acts_as="vol_target", test_sharpe=0.8),
             FoldEntry(fold=2, best_epoch=1, test_sharpe=0.1))  # unscored: no acts_as
    assert [acted(f, str(f.best_epoch)) for f in folds] == ["2", "4 → vol_target", "1"]
    line = rival_line(folds)
    assert line.startswith("1 of 3 folds acted as vol_target (fold 1)")
    assert rival_line((folds[0], folds[2])) == ""
    assert "4 → vol_target" in fold_table(folds, {})
    assert "1 of 3 folds acted as vol_target" in headline(RunSummary(folds=folds, config={}))
    assert "acted as" not in headline(RunSummary(folds=folds[:1], config={}))


def test_each_folds_trust_is_named():
    folds = (FoldEntry(fold=0, test_sharpe=0.5, trust={"t": -0.31, "w": 0.0, "bars": 900}),
             FoldEntry(fold=1, test_sharpe=0.8, trust={"t": 2.19, "w": 0.79, "bars": 1200}))
    line = trust_line(folds)
    assert line.startswith("trust in the forecast (--view trusted): fold 0 w = 0.00 (t -0.31), "
                           "fold 1 w = 0.79 (t +2.19)")
    assert trust_line((FoldEntry(fold=0, test_sharpe=0.5),)) == ""
    assert "fold 1 w = 0.79" in headline(RunSummary(folds=folds, config={}))
