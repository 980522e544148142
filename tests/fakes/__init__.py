"""Hand-written fakes for tests (a fake pynvml)."""
