"""PySpark job that reconciles primary and secondary audit logs: gaps, duplicates, lag, watermarks."""
