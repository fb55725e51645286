"""Federated OLTR algorithms and their centralized and supervised baselines."""
