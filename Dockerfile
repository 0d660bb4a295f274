# Production image for every hindsight process (migrate, worker, beat, api); the command picks the role.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1
WORKDIR /app
# Install torch first so sentence-transformers does not pull a CUDA build: point TORCH_INDEX_URL at a
# CPU-only wheel index of your choice (build arg), or leave it empty for the default index.
ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install "$TORCH_SPEC" --index-url "$TORCH_INDEX_URL"; \
    else pip install "$TORCH_SPEC"; fi
COPY pyproject.toml README.md ./
COPY hindsight ./hindsight
COPY pipeline ./pipeline
COPY workers ./workers
COPY api ./api
COPY schemas ./schemas
COPY migrations ./migrations
# The eval harness and the local stack are tools on top of the core; `hindsight eval` and `hindsight up` need them.
COPY evaluation ./evaluation
COPY devstack ./devstack
RUN pip install . && useradd --create-home hindsight
USER hindsight
EXPOSE 8765
CMD ["hindsight", "--help"]
