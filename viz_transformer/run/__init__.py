"""Running the model on text: captured runs, decoding (the one generation loop), the derived cache, interventions, forced outputs, the order test, the logit lens, activation patching."""
