"""The sqew REST server (docs/rest.md): a Litestar app over QueueService, served by uvicorn.

``sqew.server.app.create_app(settings)`` builds the app; ``sqew.server.runner.run(settings)``
serves it. Nothing is imported here, so ``python -m sqew.server.<module>`` runs cleanly.
"""

from __future__ import annotations
