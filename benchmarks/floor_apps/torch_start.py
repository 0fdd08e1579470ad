"""one_chart_torch.py's start-up: torch imported and a small random model made in a thread from the process start.
A module of its own, since Streamlit runs the app file anew as __main__ on each page run: state kept here is
the one the lifespan's thread set."""
import threading
from contextlib import asynccontextmanager

ready = threading.Event()
model = {}


def _load() -> None:
    import torch
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True)
    model["m"] = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    ready.set()


@asynccontextmanager
async def lifespan(app):
    threading.Thread(target=_load, daemon=True).start()
    yield
