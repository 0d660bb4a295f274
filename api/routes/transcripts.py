"""Transcripts: accept one for distillation, and its processing state. (Erasing one: routes/erase.py.)"""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from api.deps import NamespacePath, PublisherDep, ReadSessionDep, SettingsDep, WriteSessionDep
from hindsight.db.repositories import TranscriptRepository
from hindsight.errors import NotFound
from hindsight.services.ingest import publish_transcripts
from schemas.events import TranscriptAccepted, TranscriptBody, TranscriptIn, TranscriptStatus

router = APIRouter(prefix="/v1/namespaces/{namespace}/transcripts", tags=["ingest"])


@router.post("", status_code=202, response_model=TranscriptAccepted)
def ingest(
    namespace: NamespacePath,
    body: TranscriptBody,
    settings: SettingsDep,
    publisher: PublisherDep,
    session: WriteSessionDep,
) -> TranscriptAccepted:
    """Accept a transcript (conversation end or turn threshold) for distillation: stored when the route
    returns, its distill task sent once that commit is done."""
    event = TranscriptIn(namespace=namespace, **body.model_dump())
    return publish_transcripts(session, [event], publisher=publisher, settings=settings)[0]


@router.get("/{transcript_id}", response_model=TranscriptStatus)
def transcript_status(namespace: NamespacePath, transcript_id: uuid.UUID, session: ReadSessionDep) -> TranscriptStatus:
    """Processing state of one transcript, with its error history if it failed."""
    row = TranscriptRepository(session).get_in_namespace(namespace, transcript_id)
    if row is None:
        raise NotFound(f"transcript {transcript_id} not found")
    return TranscriptStatus.model_validate(row)
