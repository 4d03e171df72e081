"""The epoch loop's host decisions (`experiment`): the forecasts' early stopping per ensemble.

(The loop end to end is tested through its runs: test_multi_fold, test_reliability.)"""

from types import SimpleNamespace

import numpy as np
from flax import struct

from rl_trader.devices import population_mesh
from rl_trader.experiment import _stop_regressions
from rl_trader.population import members_of

NAN = float("nan")


@struct.dataclass
class Runners:
    regressing: np.ndarray


def test_each_ensemble_stops_its_seeds_regression_once_and_says_so():
    """Two folds × two seeds (+ one pad member): fold 0's IC rises every epoch, fold 1's
    falls after epoch 0, so with patience 1 fold 1's seeds stop after epoch 1, with one log
    line then and none later; the pad member follows member 0."""
    members = members_of(2, 1, [0, 1])
    cohort = SimpleNamespace(members=members, groups=members[::2], n_seeds=2, n_padded=5,
                             settings=[{}], mesh=population_mesh(1))
    lines = []
    run = SimpleNamespace(cohort=cohort, log=lines.append, prep=SimpleNamespace(
        cfg=SimpleNamespace(train=SimpleNamespace(forecast_patience=1))))
    runners = Runners(regressing=np.ones(5, bool))
    history = np.array([[0.1, 0.2], [0.2, 0.1], [0.3, NAN]])  # [E, G]
    regressing = []
    for epoch in range(3):
        runners = _stop_regressions(run, runners, history[:epoch + 1])
        regressing.append(np.asarray(runners.regressing).tolist())
    assert regressing == [[True] * 5, [True, True, False, False, True],
                          [True, True, False, False, True]]
    assert len(lines) == 1 and lines[0].startswith("fold 1: the forecasts stop regressing "
                                                   "after epoch 1 (validation IC +0.100, best "
                                                   "+0.200 at epoch 0")
