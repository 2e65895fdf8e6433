"""Fleet memory: what nvcre keeps of each node across runs (the NodeRecord kind's rules)."""
