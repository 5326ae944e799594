"""An example package that brings its own model to orch (see ../README.md and orch's docs/own-model.md)."""
