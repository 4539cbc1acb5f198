"""The package version (one place; read by the reports and the sweep store)."""

__version__ = "0.1.0"
