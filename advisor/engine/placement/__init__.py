"""Put a model on a rig the way the runtime would: one GPU, layer split, tensor parallel, offload.

Layer split follows llama.cpp's `llama_model::load_tensors`: the split points are the GPUs'
cumulative share of (free) memory, computed in float32, and repeating layer `il` of `n_layer`
(plus the output layer as layer `n_layer`) goes to the first GPU whose split point exceeds
`il / (n_layer + 1)`. Each GPU holds its layers' weights and KV cache and its own buffers; the
input embedding stays in host RAM.

One module a strategy (cpu_only, layer_split, tensor_parallel, meta_split, row_split, staged); `Placer`
(placer.py) holds what they share and picks one.
"""

from advisor.engine.placement.arith import deal_units, f32, llama_cpp_layer_devices, llama_cpp_split_points
from advisor.engine.placement.capacity import flash_attention_on, host_capacity, rig_capacities, usable_capacity
from advisor.engine.placement.placer import Placer
from advisor.engine.placement.records import DeviceUse, Placement

__all__ = ["DeviceUse", "Placement", "Placer", "deal_units", "f32", "flash_attention_on", "host_capacity",
           "llama_cpp_layer_devices", "llama_cpp_split_points", "rig_capacities", "usable_capacity"]
