"""Training and held-out scores: corpora, data splits, the training loop, evaluation, attention snapshots over training, confidence calibration."""
