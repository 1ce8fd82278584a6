"""Results as numbers you can compare: spread of one result, verdicts between two."""
