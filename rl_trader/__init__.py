"""rl_trader: a JAX/Flax deep-Q trading research system with walk-forward evaluation.

A run is five stages, each a function over typed state (`experiments.multi_fold` runs them):

1. prepare    `prepare.prepare(cfg) -> Prepared`: validate the config (`config`), load the bars
              (`data`), compute causal features (`features`), lay out the folds (`folds`);
              `Prepared.fold_data(k)` gives fold k's device arrays (`fold_data`).
2. population `population.build(prep) -> Cohort`: every (fold, setting, seed) member with fresh
              state, sharded over the devices (`devices`), and the jitted programs of the
              training run (`train`: `env` → `replay` → `agent` with `networks`).
3. train      `experiment.train_epoch(run, state, epoch) -> RunState`, E times: every member's
              epoch, the validation rollouts (`evaluate`), the NaN guard, the choice of each
              fold's ensemble (`selection`), its checkpoint (`checkpoint`), the resume state
              (`run_state`), TensorBoard (`tensorboard`).
4. score      `experiment.score`: each fold's best checkpoint once on test beside the
              baselines (`scoring`, `evaluate`, `metrics`), the headline with its
              selection-bias statistics (`headline`, `stats`).
5. report     `experiment.report`: summary.json, timings, the HTML report (`report`, `plots`).

Data flows one way through the modules in that order; `errors`, `rundir` and `options` (the
command line generated from `config`) serve every stage.
"""

from rl_trader.reproducible import use_reproducible_kernels

__version__ = "0.1.0"

use_reproducible_kernels()
