"""The app's own commands in the command palette (ctrl+p): actions, models, preset rigs."""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider


class AdvisorCommands(Provider):
    def _commands(self, with_catalog: bool) -> list[tuple[str, Callable[[], object], str]]:
        from advisor.tui.app import MainScreen

        s = self.screen
        if not isinstance(s, MainScreen):
            return []
        out: list[tuple[str, Callable[[], object], str]] = [
            ("Pick model…", s.action_pick_model, "fuzzy search over the catalog (m)"),
            ("Pick rig…", s.action_pick_rig, "a preset, this machine, or GPUs described (r)"),
            ("Export answer as Markdown", partial(s.action_export, "md"), "writes advisor-<model>.md here (e)"),
            ("Export answer as JSON", partial(s.action_export, "json"), "writes advisor-<model>.json here (E)"),
            ("Show check view", partial(s.action_show_tab, "check"), "one model on this rig (c)"),
            ("Show fit view", partial(s.action_show_tab, "fit"), "every model that fits here, best first (f)"),
            ("Show plan view", partial(s.action_show_tab, "plan"), "what to buy: the cheapest rigs for this model (p)"),
            ("Quant: auto", partial(s.set_control, "quant", "auto"), "the best quality that fits"),
        ]
        if with_catalog:
            cat = s.catalog
            out += [(f"Rig: {p.name}", partial(s.pick_preset, i), "preset rig") for i, p in cat.presets.items()]
            out += [(f"Model: {m.name}", partial(s.set_model, m.id), m.id) for m in cat.models.values()]
        return out

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands(with_catalog=False):
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands(with_catalog=True):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
