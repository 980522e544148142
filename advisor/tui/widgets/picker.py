"""An Input over an OptionList: type to fuzzy-filter, up/down to move, enter to pick."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.fuzzy import Matcher
from textual.message import Message
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option


class FuzzyPicker(Vertical):
    """Items are (label, value) pairs; picking one posts `FuzzyPicker.Picked` with the value."""

    DEFAULT_CSS = """
    FuzzyPicker { height: auto; }
    FuzzyPicker > Input { margin-bottom: 1; }
    FuzzyPicker > OptionList { height: auto; max-height: 12; border: none; padding: 0; }
    """

    class Picked(Message):
        def __init__(self, value: str) -> None:
            super().__init__()
            self.value = value

    def __init__(self, items: list[tuple[str, str]], placeholder: str = "type to search", **kwargs) -> None:
        super().__init__(**kwargs)
        self.items = items
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        yield Input(placeholder=self.placeholder, compact=True)
        yield OptionList(*[Option(label, id=value) for label, value in self.items])

    @on(Input.Changed)
    def _filter(self, event: Input.Changed) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        query = event.value.strip()
        if not query:
            options.add_options([Option(label, id=value) for label, value in self.items])
        else:
            matcher = Matcher(query)
            scored = sorted(((matcher.match(label), label, value) for label, value in self.items),
                            key=lambda t: -t[0])
            options.add_options([Option(matcher.highlight(label), id=value) for s, label, value in scored if s > 0])
        options.highlighted = 0 if options.option_count else None

    def on_key(self, event) -> None:
        if event.key in ("down", "up") and isinstance(self.screen.focused, Input):
            options = self.query_one(OptionList)
            options.action_cursor_down() if event.key == "down" else options.action_cursor_up()
            event.stop()

    def highlighted(self) -> str | None:
        """The value of the highlighted item (what Enter would pick), or None when nothing matches."""
        options = self.query_one(OptionList)
        return None if options.highlighted is None else options.get_option_at_index(options.highlighted).id

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        event.stop()
        value = self.highlighted()
        if value is not None:
            self.post_message(self.Picked(value))

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Picked(event.option.id))
