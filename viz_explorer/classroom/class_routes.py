"""The HTTP routes the app serves beside Streamlit's (st.App(routes=...), app.py and serve.py): the class stamp a
student's answer box watcher asks for (class_watch.py). Light to import: the store loads on the first request."""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PATH = "/class-stamp"                 # class_watch.PATH, from the site's root


async def class_stamp(request: Request) -> JSONResponse:
    """{"stamp": the class's stamp for the box showing question q}: read in a worker thread, never on the server's
    event loop (a database read can wait)."""
    from viz_explorer.classroom import class_watch
    code, question = request.query_params.get("code", ""), request.query_params.get("q", "")
    stamp = await run_in_threadpool(class_watch.current, code, question)
    return JSONResponse({"stamp": stamp}, headers={"Cache-Control": "no-store"})


def routes() -> list[Route]:
    return [Route(PATH, class_stamp, methods=["GET"])]
