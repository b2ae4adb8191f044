"""tidemark-lab: the seed's failure table, replayed on real servers."""
