"""The training run as pure functions (`make_train` -> `Trainer`) and the population of members
trained as one program."""
