"""The one shape of a refused change: what to do about it, per form field (or "form")."""


class Refused(ValueError):
    """A change was refused; errors maps a form field (or "form") to what to do about it.

    The domain raises a subclass (posts, accounts, freezes, site settings); the forms show
    each message next to its field and the API names the field.
    """

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors
