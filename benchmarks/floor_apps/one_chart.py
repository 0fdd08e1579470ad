"""The floor of a cold start (benchmarks/cold_start.py): a bare Streamlit app with one line of text, one Plotly
chart and one output box, nothing else. Started the same way as app.py, from the same folder (its
.streamlit/config.toml), so what it takes is what Streamlit, plotly.js and the browser take."""
import plotly.graph_objects as go
import streamlit as st

st.title("Floor")
st.plotly_chart(go.Figure(go.Heatmap(z=[[1, 2, 3], [3, 1, 2], [2, 3, 1]])))
st.code("I am an engineer.")
