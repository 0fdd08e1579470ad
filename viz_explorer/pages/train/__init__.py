"""Pages about training and files: attention over training, export."""
