"""Typed models of every kind nvcre reads or writes."""
