"""The Job controller: one TrainJob per Job, its phase, restarts, failed nodes, node health and
measurements. Decisions live in :mod:`nvcre.decide.job`; ``controller`` carries them out."""

from nvcre.controllers.job.controller import JobController

__all__ = ["JobController"]
