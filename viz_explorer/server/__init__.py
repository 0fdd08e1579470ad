"""Server plumbing: the caches, the byte-bounded memo, memory given back, the first-visit warm-up."""
