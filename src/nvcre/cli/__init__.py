"""nvcrectl: the command line (also installed as the kubectl plugin kubectl-nvcre)."""
