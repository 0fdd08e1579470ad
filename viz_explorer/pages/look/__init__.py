"""Pages that show what the model computed: overview, attention, masks, positional encoding."""
