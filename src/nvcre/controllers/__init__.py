"""The controllers: each reconcile reads state, calls the pure core and writes the difference."""
