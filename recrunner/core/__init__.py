"""The bottom layer: errors, stops, files written whole, and where everything lives on disk.

Imports nothing of recrunner's other layers, nor torch or RecBole."""
