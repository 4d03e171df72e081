"""The learner: networks (GLU, GRN, VSN), the Q-heads, losses, replay, the target EMA and the
greedy policy."""
