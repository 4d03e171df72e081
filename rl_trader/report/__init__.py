"""Summary tables, the HTML tear sheet, plots, the runs table."""
