"""Result tables into summaries, significance tests, plots and audit reports."""
