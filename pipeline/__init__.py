"""Pure distillation stages: summarize -> extract stable facts -> conflict-detect/merge -> dedupe.

Stages are typed functions over `schemas.pipeline` records with their collaborators injected. Nothing in
this package imports Celery, SQLAlchemy, HTTP frameworks or settings.
"""
