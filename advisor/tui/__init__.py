"""The terminal app (`advisor` with no command): the only package that imports textual.

It renders the engine's `Report` and never reaches hardware itself: GPU detection is a probe
callable handed in (default `advisor.probe.detect`), run in a worker thread.
"""
