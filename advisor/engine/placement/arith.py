"""The split arithmetic the runtimes use: llama.cpp's float32 split points, whole units dealt by share."""

from __future__ import annotations

import struct
from bisect import bisect_right
from functools import lru_cache


def f32(x: float) -> float:
    """Round to float32, as llama.cpp's split arithmetic does."""
    return struct.unpack("f", struct.pack("f", x))[0]


def llama_cpp_split_points(capacities: list[int]) -> list[float]:
    """Cumulative, normalised split points, computed in float32 like llama.cpp."""
    points: list[float] = []
    total = 0.0
    for cap in capacities:
        total = f32(total + f32(float(cap)))
        points.append(total)
    if total <= 0:  # no GPU has usable memory (all of it taken by other processes): an even split, none fits
        return [f32(f32(i + 1) / len(points)) for i in range(len(points))]
    return [f32(p / total) for p in points]


def llama_cpp_layer_devices(n_layer: int, n_gpu_layers: int, capacities: list[int]) -> list[int]:
    """Device of each layer 0..n_layer (the last is the output layer); -1 is the CPU."""
    return list(_layer_devices(n_layer, n_gpu_layers, tuple(capacities)))


@lru_cache(maxsize=4096)
def _layer_devices(n_layer: int, n_gpu_layers: int, capacities: tuple[int, ...]) -> tuple[int, ...]:
    points = llama_cpp_split_points(list(capacities))
    start = max(n_layer - n_gpu_layers, 0)
    active = min(n_gpu_layers, n_layer + 1)
    out = []
    for il in range(n_layer + 1):
        if il < start or il - start >= active:
            out.append(-1)
        else:
            out.append(min(bisect_right(points, f32(f32(il - start) / active)), len(capacities) - 1))
    return tuple(out)


def deal_units(units: int, share: list[float], rotation: int = 0) -> list[int]:
    """`units` whole units (heads, column blocks, rows) dealt out in proportion to `share`: each device its
    rounded-down part, the units left over one each from device `rotation` on (llama.cpp's meta device rotates
    where the rounding lands from layer to layer, so the layers together follow -ts)."""
    n = len(share)
    got = [int(units * s) for s in share]
    left = units - sum(got)
    i = rotation % n if n else 0
    while left > 0 and n:
        if share[i] > 0:
            got[i] += 1
            left -= 1
        i = (i + 1) % n
    return got


def _unit_fractions(size: int, unit: int, share: list[float], rotation: int) -> list[float]:
    """Each device's fraction of a dimension of `size` split in blocks of `unit` (the last block may be short)."""
    blocks = max(-(-size // max(unit, 1)), 1)
    got = deal_units(blocks, share, rotation)
    return [g / blocks for g in got]
