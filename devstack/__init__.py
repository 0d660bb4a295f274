"""The local stack of `hindsight up`: embedded PostgreSQL and Redis, a worker, a beat and the API as child
processes, fed with sample conversations. A developer tool on top of the core (hindsight/), which never
imports it."""
