"""Pages that step through a computation: attention step by step, decoding, the logit lens."""
