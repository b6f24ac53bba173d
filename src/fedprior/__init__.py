"""fedprior."""
