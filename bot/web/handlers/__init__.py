"""Feature handlers, one registry per module, composed in the order below (bot/web/routing.py):

- meta.py: deliveries about the webhook itself (ping);
- issues.py: a label on an issue asks for a fix;
- comments.py: ``/ribbit <command>`` on an issue or on one of the bot's pull requests;
- pull_requests.py: closed or merged bot pull requests become outcomes, "changes
  requested" reviews ask for revisions.

Each handler gets a :class:`bot.web.context.Context` and decides; bot/web/intake.py stores and
sends what they decided.
"""

from bot.web.handlers import comments, issues, meta, pull_requests
from bot.web.routing import Registry

registry = Registry(meta.registry, issues.registry, comments.registry, pull_requests.registry)

__all__ = ["registry"]
