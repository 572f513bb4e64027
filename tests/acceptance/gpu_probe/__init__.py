"""The GPU probe shipped to the pods (project code, standard library only)."""
