"""What compiling each part of the Q-network costs, written as JSON: the parts compiled alone,
vmapped over the run's members at its batch size, forward and with their gradient.

    python -m experiments.compile_parts [--out compile_parts.json] [--passes]
                                        [--gpu-target h100] [-- train options]

For the run the train options describe (default: `make train FOLDS=3`'s), with P members, a
batch of B, V market variables, K knots and width d (`NetConfig.hidden`):
- `market_vsn`: the market VSN (`networks.VSN`) on [P, B, V];
- `selector_grn`: its selector alone, a GRN of V outputs on the hat basis [P, B, V·K];
- `grn`: a GRN of width d on [P, B, d];
- `dense_on_basis`: one Dense layer of width d on the hat basis;
- `network`: the whole Q-network (`Trainer.network`) on a batch of observations.
Each is compiled as its forward pass (`…_forward`) and its gradient (`…_gradient`) of the sum
of its outputs' squares, with the persistent compilation cache off: instruction counts before
and after XLA's passes and compile seconds (`program_size.measure`). With `--passes`, each
module's seconds in XLA's HLO passes, measured in a child process (`program_size.pass_seconds`),
so that the part where a GPU's priority fusion spends its time shows (the epoch's gradient
update took 9.4 s of it on one H100, 2026-12-08, docs/benchmarks.md). With `--gpu-target
NAME`, each is compiled for that GPU without one (`experiments.gpu_target`). Benchmarks are not
tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments import gpu_target
from experiments.program_size import CHILD, device_kind, measure, with_passes
from rl_trader.agent.networks import GRN, KNOTS, VSN, hat_basis
from rl_trader.cli.options import config_from_args
from rl_trader.cli.train import build_parser
from rl_trader.data.fold_data import market_width, zero_obs
from rl_trader.run.prepare import build_cohort, prepare
from rl_trader.runtime.compile_cache import enable_compilation_cache

PROG = "python -m experiments.compile_parts"


class DenseOnBasis(nn.Module):
    """One Dense layer of width `features` on the flattened hat basis of x [..., V]."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(self.features)(hat_basis(x).reshape(x.shape[:-1] + (-1,)))


def sum_of_squares(tree: object) -> jax.Array:
    """Σ y² over every floating leaf of a module's output."""
    return sum(jnp.sum(jnp.square(y.astype(jnp.float32))) for y in jax.tree.leaves(tree)
               if jnp.issubdtype(y.dtype, jnp.floating))


def programs(name: str, module: nn.Module, x: object, members: int) -> dict[str, tuple]:
    """`name`'s forward and gradient programs, vmapped over `members` (x: one member's input,
    leaves [B, ...]), each with its arguments."""
    keys = jax.random.split(jax.random.PRNGKey(0), members)
    params = jax.eval_shape(jax.vmap(module.init, in_axes=(0, None)), keys, x)
    xs = jax.tree.map(lambda a: jax.ShapeDtypeStruct((members,) + a.shape, a.dtype), x)

    def loss(p: object, inputs: object) -> jax.Array:
        return sum_of_squares(module.apply(p, inputs))

    made: dict[str, tuple] = {}
    for kind, fn in (("forward", loss), ("gradient", jax.grad(loss))):
        program: Callable = jax.vmap(fn)
        program.__name__ = f"{name}_{kind}"  # the XLA module's name: jit_<name>_<kind>
        made[program.__name__] = (jax.jit(program), (params, xs))
    return made


def parts(cfg, c) -> dict[str, tuple]:
    """Every part's programs for the run `cfg` and its cohort `c`."""
    batch, d, members = cfg.agent.batch_size, cfg.net.hidden, c.n_padded
    n_vars = market_width(c.fold_data[0])
    row = jnp.zeros((batch, n_vars))
    basis = jnp.zeros((batch, n_vars * len(KNOTS)))
    obs = jax.tree.map(lambda a: jnp.zeros((batch,) + a.shape, a.dtype),
                       zero_obs(n_vars, cfg.features))
    made: dict[str, tuple] = {}
    for name, module, x in (("market_vsn", VSN(d, cfg.net.precision), row),
                            ("selector_grn", GRN(n_vars, hidden=d,
                                                 precision=cfg.net.precision), basis),
                            ("grn", GRN(d, precision=cfg.net.precision), jnp.zeros((batch, d))),
                            ("dense_on_basis", DenseOnBasis(d), row),
                            ("network", c.pop.trainer.network, obs)):
        made.update(programs(name, module, x, members))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="compile_parts.json")
    parser.add_argument("--passes", action="store_true",
                        help="also each XLA module's seconds in its HLO passes (measured in a "
                        "child process with XLA's pass log on)")
    gpu_target.add_option(parser)
    parser.add_argument("train_args", nargs="*", help="train options (after --)")
    args = parser.parse_args(argv)
    if args.gpu_target:
        gpu_target.with_plugin("experiments.compile_parts", sys.argv[1:] if argv is None else argv)
    if args.passes and not os.environ.get(CHILD):
        return with_passes(sys.argv[1:] if argv is None else argv, args.out,
                           "experiments.compile_parts")
    mesh = gpu_target.target_mesh(args.gpu_target)  # before any backend starts
    enable_compilation_cache("off")
    cfg = config_from_args(build_parser(PROG).parse_args(args.train_args or ["--folds", "3"]))
    c = build_cohort(prepare(cfg, fit_trees=False), placeholder=True)
    if mesh is not None:
        c = gpu_target.retarget(c, mesh)
    out: dict = {"device": device_kind(mesh), "jax": jax.__version__,
                 "members": c.n_padded, "batch": cfg.agent.batch_size,
                 "train_args": args.train_args}
    for name, (program, program_args) in parts(cfg, c).items():
        if mesh is not None:
            program_args = gpu_target.rehome(program_args, mesh)
        out[name] = measure(program, program_args)[0]
        print(name, out[name]["compile_seconds"], flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
