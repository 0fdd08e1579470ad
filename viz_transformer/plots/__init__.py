"""Plotly figures only (go.Figure, no streamlit): the shared style, the legibility rules, heatmaps, decoding, lens, model and summary figures, the architecture diagram."""
