"""Consumer-group collector: live group state, __consumer_offsets history and lag."""
