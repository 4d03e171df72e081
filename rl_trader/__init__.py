"""rl_trader: a JAX/Flax deep-Q trading research system with walk-forward evaluation.

The sub-packages are the stages of a run, and imports point one way (`tests/test_layout.py`):
`runtime` → `data` → `evaluation` → `agent` → `training` → `baselines` → `report` → `run` →
`cli`; `config`, `env` and `errors` serve all of them. A run (`rl-trader train`,
`cli/train.py`) is five steps, each a function over typed state:

1. prepare    `run.prepare.prepare(cfg) -> Prepared`: validate the config, load the bars
              (`data.loader`), compute causal features (`data.features`), lay out the folds
              (`data.folds`), fit the baselines (`baselines`); `Prepared.fold_data(k)` gives
              fold k's device arrays (`data.fold_data`).
2. population `run.prepare.build_cohort(prep) -> Cohort`: every (fold, setting, seed) member
              with fresh state, sharded over the devices (`training.population`), and the
              jitted programs of the training run (`training.train`: `env` → `agent.replay` →
              `agent.learner` with the Q-head and `agent.networks`).
3. train      `run.experiment.train_epoch(run, state, epoch) -> RunState`, E times: every
              member's epoch, the validation rollouts (`evaluation.rollout`), the NaN guard, the
              choice of each fold's ensemble (`evaluation.selection`), its checkpoint
              (`run.checkpoint`), the resume state (`run.run_state`), TensorBoard.
4. score      `run.experiment.score`: each fold's best checkpoint once on test beside the
              baselines (`run.scoring`), the headline with its selection-bias statistics
              (`evaluation.headline`, `evaluation.stats`).
5. report     `run.experiment.report`: summary.json, timings, the HTML report (`report`).
"""

from rl_trader.runtime.reproducible import use_reproducible_kernels

__version__ = "0.1.0"

use_reproducible_kernels()
