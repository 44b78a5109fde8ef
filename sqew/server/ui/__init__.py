"""The web dashboard at ``/ui`` (docs/ui.md): server-rendered pages and plain forms.

No build step and nothing from the internet: Jinja2 templates (Litestar's template engine)
and a stylesheet inline in them, shipped in the wheel; usable without JavaScript (the overview
refreshes with ``<meta http-equiv=refresh>``). Every page and action checks the key kept in
the dashboard's cookie with the API's own authenticator and scope check
(``sqew.server.ui.session``); every form carries a CSRF token; Jinja2 escapes every value, and
user-supplied strings have their control characters made visible first.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Router
from litestar.exceptions import HTTPException
from litestar.template import TemplateConfig

try:
    from litestar.plugins.jinja import JinjaTemplateEngine
except ImportError:  # Litestar before 2.22 has it only here
    from litestar.contrib.jinja import JinjaTemplateEngine  # type: ignore[no-redef]

from sqew import errors
from sqew.escapes import escape_controls
from sqew.server.ui import actions, pages, session

TEMPLATES = Path(__file__).parent / "templates"


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """The dashboard's templates: autoescaped HTML, and a ``visible`` filter that shows
    control characters as escapes."""
    env = Environment(loader=FileSystemLoader(TEMPLATES),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["visible"] = lambda text: escape_controls(str(text))
    return TemplateConfig(engine=JinjaTemplateEngine.from_environment(env))


def router() -> Router:
    """Every dashboard route under ``/ui``, with its refusals shown as pages."""
    return Router(
        path="/ui",
        route_handlers=[
            pages.overview, pages.queue_page, pages.keys_page, pages.login_page,
            actions.login, actions.logout, actions.pause, actions.resume, actions.purge,
            actions.requeue, actions.settings, actions.mint, actions.revoke,
        ],
        exception_handlers={
            session.LoginNeeded: pages.refused,
            HTTPException: pages.refused,
            errors.SqewError: pages.refused,
        },
        opt={"access": "open"},
        include_in_schema=False,
    )
