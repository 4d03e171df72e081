"""A run's stages: prepare, train epochs, score; checkpoints, the resume state, and inference on
new bars."""
