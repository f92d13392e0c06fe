"""Checkpoint interoperability: Hugging Face and Google TF1 in, Hugging Face out."""
