"""Client-side defenses and aggregation schemes, each stating the guarantee it claims."""
