"""Widgets of the main screen: the rig, the controls, the answer, the fit list and a fuzzy picker."""
