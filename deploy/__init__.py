"""Deployment files: the cluster settings (cluster.env) and their reader (settings.py)."""
