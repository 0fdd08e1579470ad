"""Pages that change or compare: knock-out, positions on/off, two inputs, patching, architectures, rollout, head statistics."""
