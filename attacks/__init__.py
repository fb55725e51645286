"""Attacks that read only what a threat model lets the server see (``ServerView``)."""
