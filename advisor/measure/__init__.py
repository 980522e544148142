"""What a benchmark measured on a real machine, and the store of those measurements (`advisor verify`).

- `results`: the records: one `Measured` per benchmark output (its tests, devices, memory, whether it ran).
- `parse`: llama-bench JSON / JSONL / CSV / markdown, llama-server and vLLM start-up logs, `vllm bench
  serve` output, Ollama `--verbose` timings and `/api/generate` responses, read into a `Measured`.
- `run`: the user's own benchmark run here, as an argument list (never a shell), bounded in time and output.
- `store`: the measurement store beside the user catalog (`advisor catalog path`), written atomically.
- `bandwidth`: the RAM copy test of `advisor detect --measure`.

Nothing here decides what an answer is; the engine's `calibration` module turns stored runs into factors.
"""
