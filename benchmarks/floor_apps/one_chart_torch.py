"""The floor of a cold start for an app whose first page shows a PyTorch model's output (benchmarks/cold_start.py):
the bare app of one_chart.py, plus what any such app must do before its first page is complete: import torch and
run a forward. torch is imported from the process start, in a thread, while the browser loads Streamlit (as the
explorer's start-up load does: torch_start.py), and the page waits for it. No checkpoint of ours: a random encoder
of 6 layers, d_model 256 (the explorer's default model has 6 layers of that width) reads 9 pieces."""
from pathlib import Path

import streamlit as st

import torch_start

app = st.App(Path(__file__).resolve(), lifespan=torch_start.lifespan)

if __name__ == "__main__":
    import plotly.graph_objects as go
    torch_start.ready.wait()
    import torch
    with torch.no_grad():
        out = torch_start.model["m"](torch.randn(1, 9, 256))
    st.title("Floor")
    st.plotly_chart(go.Figure(go.Heatmap(z=out[0, :, :9].tolist())))
    st.code(f"I am an engineer. ({out.shape[1]} pieces)")
