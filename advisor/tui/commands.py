"""The app's own commands in the command palette (ctrl+p): whatever the active screen offers.

A screen offers commands by defining `palette_commands(with_catalog) -> [(name, callback, help)]`;
this provider knows no screen class (so it imports nothing of the app).
"""

from __future__ import annotations

from typing import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

Command = tuple[str, Callable[[], object], str]


class AdvisorCommands(Provider):
    def _commands(self, with_catalog: bool) -> list[Command]:
        offer = getattr(self.screen, "palette_commands", None)
        return offer(with_catalog) if callable(offer) else []

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands(with_catalog=False):
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands(with_catalog=True):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
