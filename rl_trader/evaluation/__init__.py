"""How a policy is measured: rollouts through the env, metrics (one definition each), selection-
bias statistics, the selection rule, the headline. It knows no learner."""
