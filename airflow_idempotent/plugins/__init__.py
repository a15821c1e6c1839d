"""Airflow plugins of this provider: the run-history listener (`listener.IdempotentPlugin`)."""
