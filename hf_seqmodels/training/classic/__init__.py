"""The classic models that are counted or trained by their own code: the n-gram LM and word embeddings."""
