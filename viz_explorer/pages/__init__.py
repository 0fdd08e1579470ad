"""The page scripts, one folder per sidebar group: look, step, experiment, train."""
