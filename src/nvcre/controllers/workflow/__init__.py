"""The Workflow controller: discover, partition, run Jobs in waves, record every node's result."""

from nvcre.controllers.workflow.controller import WorkflowController

__all__ = ["WorkflowController"]
