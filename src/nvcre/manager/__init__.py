"""nvcre-manager: the controller manager process."""
