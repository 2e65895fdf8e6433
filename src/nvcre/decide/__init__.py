"""Pure decisions of the Job and Certification controllers, as functions of the objects they read.

The Workflow's live in :mod:`nvcre.orchestration`, the measurements' in :mod:`nvcre.measure`; the
controllers read state, call these and write the difference.
"""
