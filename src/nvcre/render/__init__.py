"""Rendering: override engine, merge semantics, gang-scheduling contract, Workflow resolution."""
