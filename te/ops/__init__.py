"""Operator library (filled in below)."""
