"""Node discovery filters, partitioning, placement and launch waves."""
