"""The HTTP routes, one module per resource (all under /v1/namespaces/{namespace} but health):

- health.py       GET /healthz, GET /readyz
- transcripts.py  POST /transcripts, GET /transcripts/{id}
- sessions.py     POST /sessions/{id}/turns, GET /sessions/{id}, POST /sessions/{id}/end
- memories.py     GET /memories, GET /memories/{id}; POST /memories, POST /remember,
                  POST /memories/{id}/forget | unforget | verify
- episodes.py     GET /episodes
- search.py       GET /search, GET /context, GET /rounds/search, GET /episodes/search
- erase.py        DELETE /memories/{id}, POST /erase, DELETE /transcripts/{id}, DELETE /namespaces/{namespace}

Each route takes what it needs from api/deps.py and makes one service call.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.routes import episodes, erase, health, memories, search, sessions, transcripts

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    transcripts.router,
    sessions.router,
    memories.router,
    search.router,
    episodes.router,
    erase.router,
)
