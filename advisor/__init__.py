"""advisor: can this rig run this open-weights model, how fast, and does it need NVLink?"""

__version__ = "0.1.0"
