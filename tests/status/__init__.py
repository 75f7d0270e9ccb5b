"""The stores: the state directory and the status files in git."""
