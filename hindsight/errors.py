"""One error tree; its classes drive retries (TransientError) and dead letters (PermanentError)."""


class HindsightError(Exception):
    """Base of every error hindsight raises on purpose."""


class TransientError(HindsightError):
    """Worth retrying: a rate limit, a timeout, a 5xx, a dropped connection."""


class PermanentError(HindsightError):
    """Retrying will not help: bad input, a malformed model answer after retries, a bug."""


class InvalidInput(PermanentError):
    """Input rejected at the edge, with a message meant for the caller."""


class NotFound(HindsightError):
    """A requested row does not exist (in the caller's namespace)."""


class NoServer(HindsightError):
    """A server the process needs (PostgreSQL, Redis) is neither configured nor running on the local stack."""
