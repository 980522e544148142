"""Modal pickers: a model, a rig (preset or described)."""
