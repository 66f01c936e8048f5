"""`attnkit serve`: the live attention studio.

``service`` computes the answers (no web framework); ``app`` is the Starlette application
on uvicorn that carries them. The page itself is the viewer's (``attnkit.viewer``)."""
