"""Front-end commands beyond `check`: each parses nothing, calls the engine and prints."""
