"""The model itself: config, tokenizer, hook names and points, masks, positions, attention, the Transformer, text -> model input (encoding), the batch and its one forward, checkpoints."""
